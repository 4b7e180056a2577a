/**
 * The editor's state: the workflow on the canvas (React Flow nodes and edges plus the
 * document's own settings), with undo/redo (zundo) over exactly that - never over
 * selection, measurement, save or validation state.
 *
 * The document is derived from the canvas when needed ({@link currentDoc}); every
 * change goes through the actions here, which keep references consistent: renaming a
 * node rewrites what reads it, renaming an output or a branch handle (seen as one name
 * gone and one new in the same node) follows in readers and edges, deleting a node
 * flags the nodes that still read it.
 */
import { applyEdgeChanges, applyNodeChanges, type EdgeChange, type NodeChange } from '@xyflow/react';
import { temporal } from 'zundo';
import { create } from 'zustand';
import type { NodeKind, Problem } from '../api/types';
import { checkConnection, handleKind, NEW_TOOL_HANDLE, type Connection, type Refusal } from '../lib/connect';
import { layoutGraph } from '../lib/layout';
import { nodeReads, renameNodeInConfig, renameOutputInConfig } from '../lib/refs';
import { initialObject, startingModel, type JSONSchema } from '../lib/schema';
import {
  docToFlow, flowToDoc, freshId, isFlowNode, makeNode, NODE_HEIGHT, NODE_WIDTH, NOTE_PREFIX, parentsFirst,
  type CanvasNode, type FlowEdge, type FlowNode, type NoteNode, type WorkflowMeta,
} from '../lib/serialize';
import { configHandles, emptyShapes, nodeHandles, type NodeProblems, type Shapes } from '../lib/shape';
import type { Json, JsonObject, Position, WorkflowDoc, WorkflowNode } from '../lib/workflow';
import { useCatalog } from './catalog';

export type SaveStatus = 'idle' | 'dirty' | 'saving' | 'saved' | 'error' | 'conflict';

export interface EditorState {
  workflowId: string | null;
  meta: WorkflowMeta;
  nodes: CanvasNode[];
  edges: FlowEdge[];
  draftVersion: number | null;
  publishedVersion: number | null;
  /** JSON of the document as last saved (or loaded): the autosave compares against it. */
  savedJson: string;
  saveStatus: SaveStatus;
  saveError: string | null;
  conflictVersion: number | null;
  problems: Problem[];
  /** Errors and warnings per node id, for the badges. */
  problemIndex: Record<string, NodeProblems>;
  /** The output handle whose quick-add menu is open (screen position of the menu). */
  quickAdd: { node: string; handle: string; x: number; y: number } | null;
  /** True while the current document has not been validated yet. */
  validating: boolean;
  validateError: string | null;
  shapes: Shapes;
  /** The `sys` names the document reads, from the last validate answer (`system_reads`);
   * null until one arrives for the loaded workflow, so the run panel hides nothing on a
   * guess. */
  systemReads: string[] | null;
  /** Node id -> deleted node ids it still reads. */
  flagged: Record<string, string[]>;
  /** Pane the side panel shows. */
  panel: 'config' | 'workflow' | 'versions';
  runPanelOpen: boolean;
  message: string | null;

  load: (id: string, doc: WorkflowDoc, draftVersion: number | null, publishedVersion: number | null) => void;
  /** Puts `doc` on the canvas as the draft (one undoable change; notes stay). */
  replaceDocument: (doc: WorkflowDoc) => void;
  onNodesChange: (changes: NodeChange<CanvasNode>[]) => void;
  onEdgesChange: (changes: EdgeChange<FlowEdge>[]) => void;
  /** Adds the connection; returns why it was refused (null: added). */
  connect: (conn: Connection) => Refusal | null;
  addNode: (kind: string, position: Position, opts?: { parent?: string | null; from?: { node: string;
    handle: string } }) => string | null;
  updateNode: (id: string, patch: Partial<Omit<WorkflowNode, 'id' | 'position'>>) => void;
  setConfig: (id: string, config: JsonObject) => void;
  renameNode: (oldId: string, newId: string) => string | null;
  deleteNodes: (ids: string[]) => void;
  /** Moves a node into a container's body (or out of it, with null) keeping its place. */
  reparent: (id: string, parent: string | null, position: Position) => void;
  deleteSelection: () => void;
  setMeta: (patch: Partial<WorkflowMeta>) => void;
  addNote: (position: Position) => void;
  updateNote: (id: string, text: string) => void;
  copySelection: () => number;
  /** Pastes the copied nodes 40px right of and below the last copy; the number pasted. */
  paste: () => number;
  duplicateSelection: () => void;
  autoLayout: () => void;
  applyShapes: (shapes: Shapes) => void;
  select: (ids: string[]) => void;
  setPanel: (panel: EditorState['panel']) => void;
  setRunPanelOpen: (open: boolean) => void;
  setMessage: (message: string | null) => void;
  setQuickAdd: (quickAdd: EditorState['quickAdd']) => void;
}

type History = Pick<EditorState, 'meta' | 'nodes' | 'edges'>;

const emptyMeta: WorkflowMeta = { id: '' };

function kindOf(kind: string): NodeKind | undefined {
  return useCatalog.getState().byKind[kind];
}

function strip(nodes: CanvasNode[]): CanvasNode[] {
  return nodes.map(({ selected: _s, dragging: _d, measured: _m, resizing: _r, ...rest }) => rest as CanvasNode);
}

function sameHistory(a: History, b: History): boolean {
  if (a.meta !== b.meta || a.nodes.length !== b.nodes.length || a.edges.length !== b.edges.length) return false;
  for (let i = 0; i < a.nodes.length; i += 1) {
    const x = a.nodes[i];
    const y = b.nodes[i];
    if (x.id !== y.id || x.data !== y.data || x.position.x !== y.position.x || x.position.y !== y.position.y
      || x.parentId !== y.parentId || x.width !== y.width || x.height !== y.height) return false;
  }
  for (let i = 0; i < a.edges.length; i += 1) {
    const x = a.edges[i];
    const y = b.edges[i];
    if (x.id !== y.id || x.source !== y.source || x.target !== y.target || x.sourceHandle !== y.sourceHandle) return false;
  }
  return true;
}

let docCache: { meta: WorkflowMeta; nodes: CanvasNode[]; edges: FlowEdge[]; doc: WorkflowDoc } | null = null;

/** The workflow document of the canvas (cached while the canvas is unchanged). */
export function currentDoc(state: Pick<EditorState, 'meta' | 'nodes' | 'edges'> = useEditor.getState()): WorkflowDoc {
  if (docCache && docCache.meta === state.meta && docCache.nodes === state.nodes && docCache.edges === state.edges) {
    return docCache.doc;
  }
  const doc = flowToDoc(state.meta, state.nodes, state.edges);
  docCache = { meta: state.meta, nodes: state.nodes, edges: state.edges, doc };
  return doc;
}

let clipboard: { nodes: FlowNode[]; edges: FlowEdge[] } | null = null;

/** Edits made by typing (config fields, titles, settings, notes) within this many ms of
 * the previous one of the same kind are one undo step, not one step per keystroke. */
const TYPING_MERGE_MS = 800;
let typingEdit = false;
let lastTypingRecord = 0;

function typed<A extends unknown[]>(fn: (...args: A) => void): (...args: A) => void {
  return (...args: A) => {
    typingEdit = true;
    try {
      fn(...args);
    } finally {
      typingEdit = false;
    }
  };
}
let dragSnapshot: History | null = null;

function flowNodes(nodes: CanvasNode[]): FlowNode[] {
  return nodes.filter(isFlowNode);
}

function takenIds(nodes: CanvasNode[]): Set<string> {
  return new Set(nodes.map((n) => n.id));
}

function newEdgeId(edges: FlowEdge[], source: string, target: string): string {
  return freshId(`e_${source}_${target}`, new Set(edges.map((e) => e.id)));
}

/** Rewrites every config with `fn` (only nodes whose config changes get a new object). */
function mapConfigs(nodes: CanvasNode[], fn: (config: Json, node: FlowNode) => Json): CanvasNode[] {
  return nodes.map((n) => {
    if (!isFlowNode(n) || !n.data.node.config) return n;
    const next = fn(n.data.node.config, n) as JsonObject;
    if (JSON.stringify(next) === JSON.stringify(n.data.node.config)) return n;
    return { ...n, data: { ...n.data, node: { ...n.data.node, config: next } } };
  });
}

/** The renamed name when exactly one name of `before` is gone and one new is in `after`. */
function oneRename(before: readonly string[], after: readonly string[]): [string, string] | null {
  const gone = before.filter((h) => !after.includes(h));
  const added = after.filter((h) => !before.includes(h));
  return gone.length === 1 && added.length === 1 ? [gone[0], added[0]] : null;
}

export const useEditor = create<EditorState>()(temporal((set, get) => ({
  workflowId: null,
  meta: emptyMeta,
  nodes: [],
  edges: [],
  draftVersion: null,
  publishedVersion: null,
  savedJson: '',
  saveStatus: 'idle',
  saveError: null,
  conflictVersion: null,
  problems: [],
  problemIndex: {},
  quickAdd: null,
  validating: false,
  validateError: null,
  shapes: emptyShapes,
  systemReads: null,
  flagged: {},
  panel: 'config',
  runPanelOpen: false,
  message: null,

  load: (id, doc, draftVersion, publishedVersion) => {
    const { meta, nodes, notes, edges } = docToFlow(doc, useCatalog.getState().containers);
    let placed: CanvasNode[] = nodes;
    const unplaced = doc.nodes.filter((n) => !n.position).length;
    if (doc.nodes.length > 1 && unplaced === doc.nodes.length) {
      const pos = layoutGraph(nodes.map((n) => ({ id: n.id, parent: n.parentId, width: n.width ?? NODE_WIDTH,
        height: n.height ?? NODE_HEIGHT })), edges);
      placed = nodes.map((n) => ({ ...n, position: pos.get(n.id) ?? n.position }));
    }
    set({
      workflowId: id, meta, nodes: [...placed, ...notes], edges, draftVersion, publishedVersion,
      // The canvas's own form of the document (key order, explicit defaults): opening a
      // workflow must not count as a change to save.
      savedJson: JSON.stringify(flowToDoc(meta, [...placed, ...notes], edges)), saveStatus: draftVersion === null ? 'dirty' : 'saved', saveError: null,
      conflictVersion: null, problems: [], problemIndex: {}, quickAdd: null, validating: true, validateError: null, shapes: emptyShapes, systemReads: null, flagged: {},
      panel: 'config', message: null,
    });
    useEditor.temporal.getState().clear();
  },

  replaceDocument: (doc) => {
    const { meta, nodes, notes, edges } = docToFlow({ ...doc, id: get().meta.id }, useCatalog.getState().containers);
    set({ meta, nodes: [...nodes, ...notes], edges, flagged: {} });
  },

  onNodesChange: (changes) => {
    const temporalState = useEditor.temporal.getState();
    const dragging = changes.some((c) => c.type === 'position' && c.dragging);
    const dropped = changes.some((c) => c.type === 'position' && c.dragging === false);
    if (dragging && !dragSnapshot) {
      const { meta, nodes, edges } = get();
      dragSnapshot = { meta, nodes: strip(nodes), edges };
      temporalState.pause();
    }
    const removed = changes.filter((c) => c.type === 'remove').map((c) => c.id);
    const rest = changes.filter((c) => c.type !== 'remove');
    if (rest.length) set({ nodes: applyNodeChanges(rest, get().nodes) });
    if (dropped && dragSnapshot) {
      const snapshot = dragSnapshot;
      dragSnapshot = null;
      temporalState.resume();
      useEditor.temporal.setState((t) => ({ pastStates: [...t.pastStates, snapshot].slice(-200), futureStates: [] }));
    }
    if (removed.length) get().deleteNodes(removed);
  },

  onEdgesChange: (changes) => set({ edges: applyEdgeChanges(changes, get().edges) }),

  connect: (conn) => {
    const { nodes, edges, shapes } = get();
    const graphNodes = flowNodes(nodes).map((n) => ({ id: n.id, parent: n.parentId ?? null,
      handles: nodeHandles(n.data.node, kindOf(n.data.node.type), shapes) }));
    const verdict = checkConnection(conn, graphNodes, edges);
    if (!verdict.ok) return verdict.reason;
    if (verdict.kind === 'body') {
      const target = flowNodes(nodes).find((n) => n.id === conn.target)!;
      if (target.parentId !== conn.source) get().reparent(conn.target, conn.source, { x: 40, y: 100 });
      return null;
    }
    if (handleKind(conn.sourceHandle) === 'tool') {
      const source = flowNodes(nodes).find((n) => n.id === conn.source)!;
      const config = { ...(source.data.node.config ?? {}) };
      const tools = Array.isArray(config.tools) ? [...(config.tools as JsonObject[])] : [];
      if (conn.sourceHandle === NEW_TOOL_HANDLE) {
        const names = new Set(tools.map((t) => String(t.name)));
        tools.push({ node: conn.target, name: freshId(conn.target, names) });
      } else {
        const name = conn.sourceHandle!.slice('tool:'.length);
        const i = tools.findIndex((t) => t.name === name);
        if (i >= 0) tools[i] = { ...tools[i], node: conn.target };
      }
      get().setConfig(source.id, { ...config, tools });
      return null;
    }
    const edge: FlowEdge = { id: newEdgeId(edges, conn.source, conn.target), source: conn.source,
      target: conn.target, sourceHandle: conn.sourceHandle ?? 'out', targetHandle: 'in' };
    set({ edges: [...edges, edge] });
    return null;
  },

  addNode: (kind, position, opts = {}) => {
    const spec = kindOf(kind);
    if (!spec) return null;
    const { nodes, edges } = get();
    const id = freshId(kind, takenIds(nodes));
    const config = initialObject(spec.config_schema as JSONSchema, spec.config_schema as JSONSchema);
    // A model field's schema only says "a non-empty string": its first value comes from
    // the registry (or the model the workflow already uses), never from the schema.
    if (typeof config.model === 'string') {
      const used = flowNodes(nodes).map((n) => n.data.node.config?.model).filter((m): m is string => typeof m === 'string');
      config.model = startingModel(useCatalog.getState().models, used);
    }
    const seq = flowNodes(nodes).reduce((m, n) => Math.max(m, n.data.seq + 1), 0);
    const node: FlowNode = { id, type: 'flow', position, data: { node: makeNode(id, kind, config), seq },
      selected: true };
    const parent = opts.parent ?? (opts.from ? flowNodes(nodes).find((n) => n.id === opts.from!.node)?.parentId : null);
    if (parent) node.parentId = parent;
    if (spec.traits?.container) {
      node.width = NODE_WIDTH + 240;
      node.height = NODE_HEIGHT + 190;
    }
    const others = nodes.map((n) => (n.selected ? { ...n, selected: false } : n));
    let nextEdges = edges;
    if (opts.from) {
      nextEdges = [...edges, { id: newEdgeId(edges, opts.from.node, id), source: opts.from.node, target: id,
        sourceHandle: opts.from.handle, targetHandle: 'in' }];
    }
    set({ nodes: [...others, node], edges: nextEdges, panel: 'config' });
    return id;
  },

  updateNode: typed((id, patch) => set({
    nodes: get().nodes.map((n) => (n.id === id && isFlowNode(n)
      ? { ...n, data: { ...n.data, node: { ...n.data.node, ...patch } } } : n)),
  })),

  setConfig: typed((id: string, config: JsonObject) => {
    const { nodes, edges } = get();
    const target = flowNodes(nodes).find((n) => n.id === id);
    if (!target) return;
    const kind = kindOf(target.data.node.type);
    const before = configHandles(target.data.node, kind);
    const after = configHandles({ config }, kind);
    let nextEdges = edges;
    const renamed = before && after ? oneRename(before, after) : null;
    if (renamed) {
      nextEdges = edges.map((e) => (e.source === id && e.sourceHandle === renamed[0]
        ? { ...e, sourceHandle: renamed[1] } : e));
    }
    set({
      nodes: nodes.map((n) => (n === target ? { ...target, data: { ...target.data, node: { ...target.data.node,
        config } } } : n)),
      edges: nextEdges,
    });
  }),

  renameNode: (oldId, newId) => {
    const { nodes, edges, flagged } = get();
    const clean = newId.trim();
    if (!clean || clean === oldId) return null;
    if (nodes.some((n) => n.id === clean)) return 'taken';
    const renamedNodes = mapConfigs(nodes, (config) => renameNodeInConfig(config, oldId, clean))
      .map((n) => {
        let out = n;
        if (n.id === oldId && isFlowNode(n)) out = { ...n, id: clean, data: { ...n.data, node: { ...n.data.node, id: clean } } };
        if (out.parentId === oldId) out = { ...out, parentId: clean };
        if (isFlowNode(out) && out.data.node.parent === oldId) {
          out = { ...out, data: { ...out.data, node: { ...out.data.node, parent: clean } } };
        }
        return out;
      });
    // Graph tools name their body node by id (a plain string, not a reference).
    const withTools = mapConfigs(renamedNodes, (config) => {
      const c = config as JsonObject;
      if (!Array.isArray(c.tools)) return config;
      return { ...c, tools: (c.tools as JsonObject[]).map((t) => (t?.node === oldId ? { ...t, node: clean } : t)) };
    });
    const nextFlagged: Record<string, string[]> = {};
    for (const [k, v] of Object.entries(flagged)) nextFlagged[k === oldId ? clean : k] = v;
    set({
      nodes: withTools,
      edges: edges.map((e) => (e.source === oldId || e.target === oldId
        ? { ...e, source: e.source === oldId ? clean : e.source, target: e.target === oldId ? clean : e.target } : e)),
      flagged: nextFlagged,
    });
    return null;
  },

  deleteNodes: (ids) => {
    const { nodes, edges, flagged } = get();
    const gone = new Set(ids);
    let grew = true;
    while (grew) {
      grew = false;
      for (const n of nodes) {
        if (n.parentId && gone.has(n.parentId) && !gone.has(n.id)) {
          gone.add(n.id);
          grew = true;
        }
      }
    }
    const kept = nodes.filter((n) => !gone.has(n.id));
    const deletedFlow = flowNodes(nodes).filter((n) => gone.has(n.id)).map((n) => n.id);
    const nextFlagged: Record<string, string[]> = {};
    for (const n of flowNodes(kept)) {
      const reads = deletedFlow.filter((id) => nodeReads(n.data.node, id));
      const old = flagged[n.id] ?? [];
      const all = [...new Set([...old, ...reads])];
      if (all.length) nextFlagged[n.id] = all;
    }
    set({ nodes: kept, edges: edges.filter((e) => !gone.has(e.source) && !gone.has(e.target)), flagged: nextFlagged });
  },

  reparent: (id, parent, position) => {
    const { nodes } = get();
    const moved = nodes.map((n) => {
      if (n.id !== id) return n;
      const out = { ...n, position } as CanvasNode;
      if (parent) out.parentId = parent;
      else delete out.parentId;
      if (isFlowNode(out)) {
        const node = { ...out.data.node };
        if (parent) node.parent = parent;
        else delete node.parent;
        return { ...out, data: { ...out.data, node } };
      }
      return out;
    });
    set({ nodes: parentsFirst(moved) });
  },

  deleteSelection: () => {
    const { nodes, edges } = get();
    const ids = nodes.filter((n) => n.selected).map((n) => n.id);
    const edgeIds = new Set(edges.filter((e) => e.selected).map((e) => e.id));
    if (edgeIds.size && !ids.length) set({ edges: edges.filter((e) => !edgeIds.has(e.id)) });
    else if (ids.length) {
      if (edgeIds.size) set({ edges: edges.filter((e) => !edgeIds.has(e.id)) });
      get().deleteNodes(ids);
    }
  },

  setMeta: typed((patch: Partial<WorkflowMeta>) => set({ meta: { ...get().meta, ...patch } })),

  addNote: (position) => {
    const noteIds = new Set(get().nodes.filter((n) => n.type === 'note').map((n) => n.id.slice(NOTE_PREFIX.length)));
    const id = NOTE_PREFIX + freshId('note', noteIds);
    const note: NoteNode = { id, type: 'note', position, data: { text: '' }, width: 240, height: 160 };
    set({ nodes: [...get().nodes, note] });
  },

  updateNote: typed((id: string, text: string) => set({
    nodes: get().nodes.map((n) => (n.id === id && n.type === 'note' ? { ...n, data: { ...n.data, text } } : n)),
  })),

  copySelection: () => {
    const { nodes, edges } = get();
    const picked = flowNodes(nodes).filter((n) => n.selected);
    const ids = new Set(picked.map((n) => n.id));
    for (const n of flowNodes(nodes)) if (n.parentId && ids.has(n.parentId) && !ids.has(n.id)) {
      picked.push(n);
      ids.add(n.id);
    }
    clipboard = { nodes: structuredClone(strip(picked)) as FlowNode[],
      edges: structuredClone(edges.filter((e) => ids.has(e.source) && ids.has(e.target))) };
    try {
      void navigator.clipboard?.writeText(JSON.stringify({ nodes: picked.map((n) => n.data.node) }));
    } catch {
      /* the system clipboard is optional */
    }
    return picked.length;
  },

  paste: () => {
    if (!clipboard?.nodes.length) return 0;
    const { nodes, edges } = get();
    const taken = takenIds(nodes);
    const rename = new Map<string, string>();
    for (const n of clipboard.nodes) {
      const id = freshId(n.id, taken);
      taken.add(id);
      rename.set(n.id, id);
    }
    let seq = flowNodes(nodes).reduce((m, n) => Math.max(m, n.data.seq + 1), 0);
    let pasted: CanvasNode[] = clipboard.nodes.map((n) => {
      const id = rename.get(n.id)!;
      const parentId = n.parentId ? rename.get(n.parentId) ?? n.parentId : undefined;
      const top = !n.parentId || !rename.has(n.parentId);
      const out: FlowNode = { ...n, id, parentId, selected: true,
        position: top ? { x: n.position.x + 40, y: n.position.y + 40 } : n.position,
        data: { seq: seq++, node: { ...n.data.node, id, parent: parentId ?? null } } };
      if (!parentId) delete out.parentId;
      if (!parentId) delete out.data.node.parent;
      return out;
    });
    for (const [from, to] of rename) pasted = mapConfigs(pasted, (c) => renameNodeInConfig(c, from, to));
    const newEdges = clipboard.edges.map((e) => ({ ...e, selected: false, id: freshId(`${e.id}_copy`, new Set(edges.map((x) => x.id))),
      source: rename.get(e.source)!, target: rename.get(e.target)! }));
    set({ nodes: [...nodes.map((n) => (n.selected ? { ...n, selected: false } : n)), ...pasted],
      edges: [...edges, ...newEdges] });
    // the next paste lands 40px further on, never on this copy
    clipboard = { nodes: strip(pasted).filter(isFlowNode), edges: newEdges };
    return pasted.length;
  },

  duplicateSelection: () => {
    if (get().copySelection()) get().paste();
  },

  autoLayout: () => {
    const { nodes, edges } = get();
    const flows = flowNodes(nodes);
    const size = new Map(flows.map((n) => [n.id, { width: n.measured?.width ?? n.width ?? NODE_WIDTH,
      height: n.measured?.height ?? n.height ?? NODE_HEIGHT }]));
    const containers = new Set(flows.filter((n) => n.width !== undefined && flows.some((c) => c.parentId === n.id))
      .map((n) => n.id));
    let pos = new Map<string, Position>();
    // Bodies first: a frame grows to hold its laid-out body, then the level around it is laid
    // out with the frame's new size (once per nesting level).
    for (let round = 0; round < 4; round += 1) {
      pos = layoutGraph(flows.map((n) => ({ id: n.id, parent: n.parentId, ...size.get(n.id)! })), edges);
      let grew = false;
      for (const id of containers) {
        let width = 0;
        let height = 0;
        for (const child of flows) {
          if (child.parentId !== id) continue;
          const p = pos.get(child.id)!;
          const s = size.get(child.id)!;
          width = Math.max(width, p.x + s.width + 40);
          height = Math.max(height, p.y + s.height + 40);
        }
        const cur = size.get(id)!;
        if (width > cur.width || height > cur.height) {
          size.set(id, { width: Math.max(width, cur.width), height: Math.max(height, cur.height) });
          grew = true;
        }
      }
      if (!grew) break;
    }
    set({ nodes: nodes.map((n) => {
      if (!pos.has(n.id)) return n;
      const moved = { ...n, position: pos.get(n.id)! };
      if (containers.has(n.id)) {
        moved.width = size.get(n.id)!.width;
        moved.height = size.get(n.id)!.height;
      }
      return moved;
    }) });
  },

  applyShapes: (shapes) => {
    const { shapes: old, nodes, edges } = get();
    let nextNodes = nodes;
    let nextEdges = edges;
    for (const [id, outs] of Object.entries(shapes.outputs)) {
      const before = old.outputs[id];
      const renamed = before ? oneRename(before, outs) : null;
      if (renamed) nextNodes = mapConfigs(nextNodes, (c, n) => (n.id === id ? c
        : renameOutputInConfig(c, id, renamed[0], renamed[1])));
    }
    for (const [id, handles] of Object.entries(shapes.handles)) {
      const before = old.handles[id];
      const renamed = before ? oneRename(before, handles) : null;
      if (renamed && edges.some((e) => e.source === id && e.sourceHandle === renamed[0])) {
        nextEdges = nextEdges.map((e) => (e.source === id && e.sourceHandle === renamed[0]
          ? { ...e, sourceHandle: renamed[1] } : e));
      }
    }
    if (nextNodes !== nodes || nextEdges !== edges) set({ nodes: nextNodes, edges: nextEdges });
    set({ shapes: shareShapes(old, shapes) });
  },

  select: (ids) => {
    const want = new Set(ids);
    set({ nodes: get().nodes.map((n) => (!!n.selected === want.has(n.id) ? n : { ...n, selected: want.has(n.id) })) });
  },
  setPanel: (panel) => set({ panel }),
  setRunPanelOpen: (open) => set({ runPanelOpen: open }),
  setMessage: (message) => set({ message }),
  setQuickAdd: (quickAdd) => set({ quickAdd }),
}), {
  partialize: (s): History => ({ meta: s.meta, nodes: strip(s.nodes), edges: s.edges.map(({ selected: _s, ...e }) => e) }),
  equality: sameHistory,
  limit: 200,
  handleSet: (record) => (pastState, replace, currentState, deltaState) => {
    const now = Date.now();
    if (typingEdit && now - lastTypingRecord < TYPING_MERGE_MS) {
      lastTypingRecord = now;
      return;
    }
    lastTypingRecord = typingEdit ? now : 0;
    (record as unknown as (...a: unknown[]) => void)(pastState, replace, currentState, deltaState);
  },
}));

/** `next` with the lists equal to `prev`'s kept as the same arrays, so node components
 * whose handles did not change do not re-render after a validation. */
function shareShapes(prev: Shapes, next: Shapes): Shapes {
  const share = (a: Record<string, string[]>, b: Record<string, string[]>) => Object.fromEntries(
    Object.entries(b).map(([id, list]) => [id, a[id] && a[id].join('\u0000') === list.join('\u0000') ? a[id] : list]));
  return { handles: share(prev.handles, next.handles), outputs: share(prev.outputs, next.outputs), types: next.types };
}

/** The selected workflow nodes. */
export function selectedFlowNodes(nodes: CanvasNode[]): FlowNode[] {
  return nodes.filter((n): n is FlowNode => isFlowNode(n) && !!n.selected);
}
