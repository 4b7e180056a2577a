/**
 * Between the workflow document and React Flow's nodes and edges.
 *
 * - Document positions are absolute; a node inside a container (`parent`) is placed
 *   relative to it on the canvas (React Flow's sub-flows), so moving a container moves
 *   its body. Containers come before their body nodes on the canvas (React Flow needs
 *   parents first); the document's own node order - which decides the order parallel
 *   answers stream in - is kept in `data.seq` and restored by {@link flowToDoc}.
 * - Edges keep their handles; the one target handle is `in` (the engine's default,
 *   left out of the document again when it is the default).
 * - Sticky notes (the document's `notes`) are canvas nodes of type `note` whose canvas
 *   id is `note:<id>`, so a note and a node may share an id.
 */
import type { Edge, Node } from '@xyflow/react';
import type { JsonObject, NoteDecl, Position, WorkflowDoc, WorkflowEdge, WorkflowNode } from './workflow';

/** What a workflow node carries on the canvas: the node without its position. */
export interface FlowNodeData extends Record<string, unknown> {
  node: Omit<WorkflowNode, 'position'>;
  /** Index in the document's node list. */
  seq: number;
}

export interface NoteData extends Record<string, unknown> {
  text: string;
  color?: string;
}

/** Canvas id of the note `id`. */
export const NOTE_PREFIX = 'note:';

export type FlowNode = Node<FlowNodeData, 'flow'>;
export type NoteNode = Node<NoteData, 'note'>;
export type CanvasNode = FlowNode | NoteNode;
export type FlowEdge = Edge;

/** The document without nodes and edges (id, name, inputs, variables, limits, ...). */
export type WorkflowMeta = Omit<WorkflowDoc, 'nodes' | 'edges' | 'notes'>;

export const NODE_WIDTH = 200;
export const NODE_HEIGHT = 90;
const BODY_PAD = 40;
const BODY_HEADER = 70;

/** True for a canvas node that stands for a workflow node (not a note). */
export function isFlowNode(node: CanvasNode): node is FlowNode {
  return node.type === 'flow';
}

function depth(id: string, byId: Map<string, WorkflowNode>): number {
  let d = 0;
  const seen = new Set<string>();
  for (let cur = byId.get(id); cur?.parent && !seen.has(cur.parent); cur = byId.get(cur.parent)) {
    seen.add(cur.parent);
    d += 1;
  }
  return d;
}

function absolute(node: WorkflowNode): Position {
  return { x: node.position?.x ?? 0, y: node.position?.y ?? 0 };
}

/**
 * The canvas form of `doc`. `containers`: the kinds whose nodes hold a body (the
 * catalog's `container` trait); a node of such a kind, or any node that is some body's
 * parent, is drawn as a frame sized to its body.
 */
export function docToFlow(doc: WorkflowDoc, containers: ReadonlySet<string> = new Set()):
  { meta: WorkflowMeta; nodes: FlowNode[]; notes: NoteNode[]; edges: FlowEdge[] } {
  const { nodes: docNodes, edges: docEdges, notes: docNotes, ...meta } = doc;
  const byId = new Map(docNodes.map((n) => [n.id, n]));
  const parents = new Set(docNodes.map((n) => n.parent).filter((p): p is string => !!p && byId.has(p)));
  const order = docNodes.map((n, seq) => ({ n, seq, d: depth(n.id, byId) }));
  order.sort((a, b) => a.d - b.d || a.seq - b.seq);
  const nodes: FlowNode[] = order.map(({ n, seq }) => {
    const { position: _ignored, ...rest } = n;
    const abs = absolute(n);
    const parent = n.parent && byId.has(n.parent) ? byId.get(n.parent)! : null;
    const pos = parent ? { x: abs.x - absolute(parent).x, y: abs.y - absolute(parent).y } : abs;
    const flow: FlowNode = { id: n.id, type: 'flow', position: pos, data: { node: rest, seq } };
    if (parent) flow.parentId = parent.id;
    if (parents.has(n.id) || containers.has(n.type)) {
      const size = bodySize(n, docNodes);
      flow.width = size.width;
      flow.height = size.height;
    }
    return flow;
  });
  const edges: FlowEdge[] = docEdges.map((e) => ({
    id: e.id, source: e.source, target: e.target,
    sourceHandle: e.sourceHandle ?? 'out', targetHandle: e.targetHandle ?? 'in',
  }));
  const notes: NoteNode[] = (docNotes ?? []).map((n) => {
    const data: NoteData = { text: n.text ?? '' };
    if (n.color) data.color = n.color;
    return { id: NOTE_PREFIX + n.id, type: 'note', position: { x: n.position?.x ?? 0, y: n.position?.y ?? 0 },
      width: n.width ?? 240, height: n.height ?? 160, data };
  });
  return { meta, nodes, notes, edges };
}

/** The frame of a container: its body's bounding box plus a margin (a minimum when empty). */
export function bodySize(container: WorkflowNode, all: WorkflowNode[]): { width: number; height: number } {
  const origin = absolute(container);
  let width = NODE_WIDTH + 2 * BODY_PAD + 40;
  let height = NODE_HEIGHT + BODY_HEADER + 2 * BODY_PAD;
  for (const child of all) {
    if (child.parent !== container.id) continue;
    const p = absolute(child);
    width = Math.max(width, p.x - origin.x + NODE_WIDTH + BODY_PAD);
    height = Math.max(height, p.y - origin.y + NODE_HEIGHT + BODY_PAD);
  }
  return { width, height };
}

/** The document of the canvas, nodes in document order (`notes` only when there are some). */
export function flowToDoc(meta: WorkflowMeta, nodes: readonly CanvasNode[], edges: readonly FlowEdge[]): WorkflowDoc {
  const flows = nodes.filter(isFlowNode);
  const byId = new Map(flows.map((n) => [n.id, n]));
  const absCache = new Map<string, Position>();
  const abs = (n: FlowNode, guard = 0): Position => {
    const hit = absCache.get(n.id);
    if (hit) return hit;
    const parent = n.parentId ? byId.get(n.parentId) : undefined;
    const base = parent && guard < 64 ? abs(parent, guard + 1) : { x: 0, y: 0 };
    const p = { x: base.x + n.position.x, y: base.y + n.position.y };
    absCache.set(n.id, p);
    return p;
  };
  const ordered = [...flows].sort((a, b) => a.data.seq - b.data.seq);
  const docNodes: WorkflowNode[] = ordered.map((n) => {
    const { id, type, ...rest } = n.data.node;
    const out: WorkflowNode = { id, type, ...rest, position: abs(n) };
    if (n.parentId) out.parent = n.parentId;
    else delete out.parent;
    return out;
  });
  const docEdges: WorkflowEdge[] = edges.map((e) => {
    const out: WorkflowEdge = { id: e.id, source: e.source, sourceHandle: e.sourceHandle ?? 'out', target: e.target };
    if (e.targetHandle && e.targetHandle !== 'in') out.targetHandle = e.targetHandle;
    return out;
  });
  const notes: NoteDecl[] = nodes.filter((n): n is NoteNode => n.type === 'note').map((n) => {
    const note: NoteDecl = { id: n.id.startsWith(NOTE_PREFIX) ? n.id.slice(NOTE_PREFIX.length) : n.id, text: n.data.text,
      position: { x: n.position.x, y: n.position.y }, width: n.measured?.width ?? n.width ?? 240,
      height: n.measured?.height ?? n.height ?? 160 };
    if (n.data.color) note.color = n.data.color;
    return note;
  });
  const doc = { ...meta, nodes: docNodes, edges: docEdges } as WorkflowDoc;
  if (notes.length) doc.notes = notes;
  return doc;
}

/** A fresh id `base`, `base_2`, `base_3`, ... not in `taken`. */
export function freshId(base: string, taken: ReadonlySet<string>): string {
  const clean = base.replace(/[^A-Za-z0-9_]+/g, '_').replace(/^_+|_+$/g, '') || 'node';
  const start = /^[A-Za-z_]/.test(clean) ? clean : `n_${clean}`;
  if (!taken.has(start)) return start;
  for (let i = 2; ; i += 1) if (!taken.has(`${start}_${i}`)) return `${start}_${i}`;
}

/** A new workflow node of `kind` with `config` (kept as given). */
export function makeNode(id: string, kind: string, config: JsonObject, name = ''): Omit<WorkflowNode, 'position'> {
  const node: Omit<WorkflowNode, 'position'> = { id, type: kind };
  if (name) node.name = name;
  // Always present: a kind whose config cannot be built from defaults alone needs the key.
  node.config = config;
  return node;
}

/** `nodes` with every container before the nodes of its body (React Flow draws a child
 * only after its parent), otherwise in their current order. */
export function parentsFirst<T extends { id: string; parentId?: string }>(nodes: readonly T[]): T[] {
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const depth = (n: T): number => {
    let d = 0;
    for (let p = n.parentId ? byId.get(n.parentId) : undefined; p && d < 64; p = p.parentId ? byId.get(p.parentId) : undefined) d += 1;
    return d;
  };
  return nodes.map((n, i) => ({ n, i, d: depth(n) })).sort((a, b) => a.d - b.d || a.i - b.i).map((x) => x.n);
}
