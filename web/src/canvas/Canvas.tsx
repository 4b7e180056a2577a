/**
 * The React Flow canvas of the editor: nodes and edges from the editor store, drops
 * from the palette (into a container's body when dropped on it), connections checked
 * by lib/connect.ts, the quick-add menu of an output handle, minimap and controls.
 */
import {
  Background, Controls, MiniMap, ReactFlow, useReactFlow, type Connection as RFConnection, type IsValidConnection,
  type FinalConnectionState, type NodeTypes, type OnConnect, useNodesInitialized,
} from '@xyflow/react';
import { useCallback, useEffect, useMemo, useRef, useState, type DragEvent, type RefObject } from 'react';
import type { NodeKind } from '../api/types';
import { backEdges, BODY_HANDLE, checkConnection, connectionToNode, TOOL_HANDLE_PREFIX, TOOL_TARGET_HANDLE, type Refusal } from '../lib/connect';
import { flowLabels, t, useLanguage, useT, type MessageKey } from '../i18n';
import { besideSpot, freeSpot, type Box } from '../lib/placement';
import { isFlowNode, NODE_HEIGHT, NODE_WIDTH, type CanvasNode, type FlowEdge, type FlowNode } from '../lib/serialize';
import { nodeHandles, toolField } from '../lib/shape';
import type { Position } from '../lib/workflow';
import { useCatalog } from '../store/catalog';
import { useEditor } from '../store/editor';
import { FlowNodeView } from './FlowNodeView';
import { NoteNodeView } from './NoteNodeView';
import { KIND_MIME, Palette } from './Palette';

const nodeTypes: NodeTypes = { flow: FlowNodeView, note: NoteNodeView };

/** A refused connection's reason in the UI language. */
function refusalText(reason: Refusal): string {
  return t(`connect.${reason.code}` as MessageKey, reason.params);
}

/** Absolute canvas position of a node (sum of its parents' positions). */
export function absolutePosition(node: CanvasNode, byId: Map<string, CanvasNode>): Position {
  let x = node.position.x;
  let y = node.position.y;
  for (let p = node.parentId ? byId.get(node.parentId) : undefined, guard = 0; p && guard < 64;
    p = p.parentId ? byId.get(p.parentId) : undefined, guard += 1) {
    x += p.position.x;
    y += p.position.y;
  }
  return { x, y };
}

/** The innermost container whose frame holds `point`, with the point relative to it. */
export function containerAt(nodes: CanvasNode[], point: Position, containers: ReadonlySet<string>):
  { id: string; position: Position } | null {
  const byId = new Map(nodes.map((n) => [n.id, n]));
  let best: { id: string; position: Position; depth: number } | null = null;
  for (const n of nodes) {
    if (!isFlowNode(n) || !containers.has(n.data.node.type)) continue;
    const abs = absolutePosition(n, byId);
    const w = n.measured?.width ?? n.width ?? 0;
    const h = n.measured?.height ?? n.height ?? 0;
    if (point.x < abs.x || point.y < abs.y || point.x > abs.x + w || point.y > abs.y + h) continue;
    let depth = 0;
    for (let p = n.parentId; p; p = byId.get(p)?.parentId) depth += 1;
    if (!best || depth > best.depth) best = { id: n.id, position: { x: point.x - abs.x, y: point.y - abs.y }, depth };
  }
  return best && { id: best.id, position: best.position };
}

/** [tool node, tool name, body node] of every graph tool attached to an existing body node:
 * drawn as edges from the tool's handle (they are config, not edges of the document). */
export function toolAttachments(nodes: CanvasNode[], byKind: Record<string, NodeKind>): [string, string, string][] {
  const ids = new Set(nodes.map((n) => n.id));
  const out: [string, string, string][] = [];
  for (const n of nodes) {
    if (!isFlowNode(n)) continue;
    const field = toolField(byKind[n.data.node.type]);
    const list = field ? n.data.node.config?.[field] : null;
    if (!Array.isArray(list)) continue;
    for (const tool of list) {
      if (tool && typeof tool === 'object' && !Array.isArray(tool) && typeof tool.node === 'string' && ids.has(tool.node)) {
        out.push([n.id, String(tool.name ?? ''), tool.node]);
      }
    }
  }
  return out;
}

/** [container, node] for each body node without incoming edges of a container that has
 * a body handle (iteration, loop): where each round of the body starts. */
export function bodyRoots(nodes: CanvasNode[], edges: FlowEdge[], containers: ReadonlySet<string>): [string, string][] {
  const hasInput = new Set(edges.map((e) => e.target));
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const byKind = useCatalog.getState().byKind;
  const out: [string, string][] = [];
  for (const n of nodes) {
    const parent = n.parentId ? byId.get(n.parentId) : undefined;
    if (!parent || !isFlowNode(parent) || !isFlowNode(n) || hasInput.has(n.id)) continue;
    if (!containers.has(parent.data.node.type) || toolField(byKind[parent.data.node.type])) continue;
    out.push([parent.id, n.id]);
  }
  return out;
}

/** The size a new node takes before it is measured. */
const NEW_NODE = { width: NODE_WIDTH, height: NODE_HEIGHT };

function boxOf(n: CanvasNode): Box {
  return { x: n.position.x, y: n.position.y, width: n.measured?.width ?? n.width ?? NODE_WIDTH,
    height: n.measured?.height ?? n.height ?? NODE_HEIGHT };
}

function QuickAdd() {
  const quickAdd = useEditor((s) => s.quickAdd);
  const setQuickAdd = useEditor((s) => s.setQuickAdd);
  const addNode = useEditor((s) => s.addNode);
  const exclude = useCallback((k: { traits: Record<string, unknown> }) => !!k.traits?.entry, []);
  if (!quickAdd) return null;
  const pick = (kind: string) => {
    setQuickAdd(null);
    const { nodes } = useEditor.getState();
    // placed where no sibling is (lib/placement.ts): siblings share the parent's coordinates
    const siblings = (parent: string | undefined) => nodes.filter((n) => n.parentId === parent).map(boxOf);
    if (quickAdd.handle === BODY_HANDLE) {
      // Into the body, at its top left, below the ones already there.
      addNode(kind, freeSpot({ x: 40, y: 100 }, NEW_NODE, siblings(quickAdd.node)), { parent: quickAdd.node });
      return;
    }
    const from = nodes.find((n) => n.id === quickAdd.node);
    const index = useEditor.getState().edges.filter((e) => e.source === quickAdd.node).length;
    const pos = from ? besideSpot(boxOf(from), index, NEW_NODE, siblings(from.parentId)) : { x: 0, y: 0 };
    addNode(kind, pos, { from: { node: quickAdd.node, handle: quickAdd.handle } });
    setQuickAdd(null);
  };
  return (
    <div className="quick-add-backdrop" onMouseDown={(e) => { if (e.target === e.currentTarget) setQuickAdd(null); }}
      onKeyDown={(e) => { if (e.key === 'Escape') setQuickAdd(null); }}>
      <div className="quick-add" style={{ left: Math.min(quickAdd.x + 8, window.innerWidth - 280),
        top: Math.min(quickAdd.y, window.innerHeight - 420) }}>
        <Palette compact autoFocus onPick={pick} exclude={exclude} />
      </div>
    </div>
  );
}

/** The canvas view follows the canvas's size (fitted again when the run panel opens
 * or the window is resized) until the person pans or zooms; Zoom to fit and
 * Auto-layout make it follow again. Shared with the toolbar. */
const view = { follow: true, bottom: 24 };

type FitView = ReturnType<typeof useReactFlow>['fitView'];

/** Margins of a fitted view: room on the left for the zoom controls and at the bottom
 * for the minimap, so neither covers a node. */
function fitOptions() {
  return { maxZoom: 1, padding: { top: '24px', right: '24px', left: '64px', bottom: `${view.bottom}px` } } as const;
}

/** Fits the view with the canvas's margins and makes it follow resizes again. */
export function fitCanvas(fitView: FitView): void {
  view.follow = true;
  void fitView(fitOptions());
}

/** Fits the view once every node of the opened workflow has been measured (React Flow's
 * own `fitView` prop may run when only some are). */
function FitOnOpen() {
  const initialised = useNodesInitialized();
  const { fitView } = useReactFlow();
  const done = useRef(false);
  useEffect(() => {
    if (initialised && !done.current) {
      done.current = true;
      fitCanvas(fitView);
    }
  }, [initialised, fitView]);
  return null;
}

/** Minimap size for a canvas box: about a sixth of its width (120-190 px), hidden
 * when the canvas is too small for it to help. */
export function minimapSize(width: number, height: number): { width: number; height: number } | null {
  if (width < 480 || height < 260) return null;
  const w = Math.round(Math.min(190, Math.max(120, width / 6)));
  return { width: w, height: Math.round(w * 0.62) };
}

const MINIMAP_KEY = 'flowloom.minimap';

/** The canvas box's size, and the view fitted again when it changes while it follows. */
function useCanvasSize(ref: RefObject<HTMLDivElement | null>): { width: number; height: number } {
  const [size, setSize] = useState({ width: 0, height: 0 });
  const { fitView } = useReactFlow();
  useEffect(() => {
    const el = ref.current;
    if (!el || typeof ResizeObserver === 'undefined') return undefined;
    let frame = 0;
    let last = '';
    const observer = new ResizeObserver(() => {
      cancelAnimationFrame(frame);
      frame = requestAnimationFrame(() => {
        const box = { width: Math.round(el.clientWidth), height: Math.round(el.clientHeight) };
        const key = `${box.width}x${box.height}`;
        if (key === last) return;
        const first = !last;
        last = key;
        setSize(box);
        if (!first && view.follow && useEditor.getState().nodes.length) void fitView(fitOptions());
      });
    });
    observer.observe(el);
    return () => { cancelAnimationFrame(frame); observer.disconnect(); };
  }, [ref, fitView]);
  return size;
}

export function Canvas() {
  const nodes = useEditor((s) => s.nodes);
  const edges = useEditor((s) => s.edges);
  const onNodesChange = useEditor((s) => s.onNodesChange);
  const onEdgesChange = useEditor((s) => s.onEdgesChange);
  const connect = useEditor((s) => s.connect);
  const addNode = useEditor((s) => s.addNode);
  const setMessage = useEditor((s) => s.setMessage);
  const setPanel = useEditor((s) => s.setPanel);
  const problems = useEditor((s) => s.problems);
  const containers = useCatalog((s) => s.containers);
  const { screenToFlowPosition } = useReactFlow();
  const tr = useT();
  const lang = useLanguage((s) => s.lang);
  const ariaLabels = useMemo(() => flowLabels(lang), [lang]);
  const box = useRef<HTMLDivElement>(null);
  const size = useCanvasSize(box);
  const [minimapOn, setMinimapOn] = useState(() => {
    try { return localStorage.getItem(MINIMAP_KEY) !== 'off'; } catch { return true; }
  });
  const toggleMinimap = () => {
    setMinimapOn((on) => {
      try { localStorage.setItem(MINIMAP_KEY, on ? 'off' : 'on'); } catch { /* private mode: not kept */ }
      return !on;
    });
  };
  const mini = minimapOn ? minimapSize(size.width, size.height) : null;
  view.bottom = mini ? mini.height + 24 : 24;
  // a pan or zoom by the person (React Flow passes the event; a fitView passes none)
  const onMoveStart = useCallback((event: unknown) => { if (event) view.follow = false; }, []);
  const stopFollowing = useCallback(() => { view.follow = false; }, []);
  const follow = useCallback(() => { view.follow = true; }, []);

  const attachKey = useMemo(() => toolAttachments(nodes, useCatalog.getState().byKind).map((a) => a.join('\u0001')).join('\u0000'),
    [nodes]);
  const attachEdges = useMemo<FlowEdge[]>(() => (attachKey ? attachKey.split('\u0000') : []).map((k) => {
    const [source, name, target] = k.split('\u0001');
    return { id: `attach:${source}:${name}`, source, target, sourceHandle: `${TOOL_HANDLE_PREFIX}${name}`,
      targetHandle: TOOL_TARGET_HANDLE, className: 'edge-tool', deletable: false, selectable: false, animated: true };
  }), [attachKey]);
  const bodyKey = useMemo(() => bodyRoots(nodes, edges, containers).map((a) => a.join('\u0001')).join('\u0000'),
    [nodes, edges, containers]);
  const bodyEdges = useMemo<FlowEdge[]>(() => (bodyKey ? bodyKey.split('\u0000') : []).map((k) => {
    const [source, target] = k.split('\u0001');
    return { id: `body:${source}:${target}`, source, target, sourceHandle: BODY_HANDLE, targetHandle: 'in',
      className: 'edge-body', deletable: false, selectable: false };
  }), [bodyKey]);
  const badEdges = useMemo(() => new Set(problems.filter((p) => p.edge_id && p.severity === 'error').map((p) => p.edge_id!)),
    [problems]);
  const loopEdges = useMemo(() => backEdges(edges), [edges]);
  const shownEdges = useMemo<FlowEdge[]>(() => {
    const flow = badEdges.size === 0 && loopEdges.size === 0 ? edges : edges.map((e) => (badEdges.has(e.id)
      ? { ...e, className: 'edge-error' } : loopEdges.has(e.id) ? { ...e, className: 'edge-loop' } : e));
    return attachEdges.length || bodyEdges.length ? [...flow, ...attachEdges, ...bodyEdges] : flow;
  }, [edges, badEdges, loopEdges, attachEdges, bodyEdges]);

  const onConnect: OnConnect = useCallback((c: RFConnection) => {
    const reason = connect({ source: c.source, target: c.target, sourceHandle: c.sourceHandle, targetHandle: c.targetHandle });
    setMessage(reason ? refusalText(reason) : null);
  }, [connect, setMessage]);

  const isValidConnection: IsValidConnection = useCallback((c) => {
    const { nodes: all, edges: es, shapes } = useEditor.getState();
    const byKind = useCatalog.getState().byKind;
    const graph = all.filter(isFlowNode).map((n: FlowNode) => ({ id: n.id, parent: n.parentId ?? null,
      handles: nodeHandles(n.data.node, byKind[n.data.node.type], shapes) }));
    return checkConnection({ source: c.source, target: c.target, sourceHandle: c.sourceHandle ?? null,
      targetHandle: c.targetHandle ?? null }, graph, es).ok;
  }, []);

  // A refused connection says why (the same rules that refused it).
  const onConnectEnd = useCallback((e: MouseEvent | TouchEvent, state: FinalConnectionState) => {
    if (state.isValid === null && state.fromNode && state.fromHandle) {
      // Dropped on a node's body, away from its handles: connect to its input, or say
      // why not, instead of dropping the gesture without a word.
      const point = 'changedTouches' in e ? e.changedTouches[0] : e;
      const under = point && document.elementFromPoint(point.clientX, point.clientY)?.closest('.react-flow__node');
      const nodeId = under?.getAttribute('data-id');
      const conn = nodeId ? connectionToNode({ node: state.fromNode.id, handle: state.fromHandle.id ?? null,
        type: state.fromHandle.type }, nodeId) : null;
      if (conn) {
        const reason = connect(conn);
        setMessage(reason ? refusalText(reason) : null);
      }
      return;
    }
    if (state.isValid !== false || !state.fromNode || !state.toHandle) return;
    const { nodes: all, edges: es, shapes } = useEditor.getState();
    const byKind = useCatalog.getState().byKind;
    const graph = all.filter(isFlowNode).map((n: FlowNode) => ({ id: n.id, parent: n.parentId ?? null,
      handles: nodeHandles(n.data.node, byKind[n.data.node.type], shapes) }));
    const from = state.fromHandle;
    const source = from?.type === 'source' ? { node: state.fromNode.id, handle: from.id }
      : { node: state.toHandle.nodeId, handle: state.toHandle.id };
    const target = from?.type === 'source' ? { node: state.toHandle.nodeId, handle: state.toHandle.id }
      : { node: state.fromNode.id, handle: from?.id };
    const verdict = checkConnection({ source: source.node, target: target.node, sourceHandle: source.handle ?? null,
      targetHandle: target.handle ?? null }, graph, es);
    if (!verdict.ok) setMessage(refusalText(verdict.reason));
  }, [connect, setMessage]);

  const onDragOver = useCallback((e: DragEvent) => {
    if (e.dataTransfer.types.includes(KIND_MIME)) {
      e.preventDefault();
      e.dataTransfer.dropEffect = 'move';
    }
  }, []);

  const onDrop = useCallback((e: DragEvent) => {
    const kind = e.dataTransfer.getData(KIND_MIME);
    if (!kind) return;
    e.preventDefault();
    e.stopPropagation();
    const point = screenToFlowPosition({ x: e.clientX, y: e.clientY });
    const inside = containerAt(useEditor.getState().nodes, point, containers);
    if (inside) addNode(kind, inside.position, { parent: inside.id });
    else addNode(kind, point);
  }, [screenToFlowPosition, containers, addNode]);

  const reparent = useEditor((s) => s.reparent);
  const onNodeDragStop = useCallback((_e: unknown, dragged: CanvasNode) => {
    if (!isFlowNode(dragged)) return;
    const all = useEditor.getState().nodes;
    const byId = new Map(all.map((n) => [n.id, n]));
    const abs = absolutePosition(dragged, byId);
    const centre = { x: abs.x + (dragged.measured?.width ?? NODE_WIDTH) / 2, y: abs.y + 20 };
    // Never into itself or its own body.
    const inside = (id: string) => {
      for (let p: string | undefined = id; p; p = byId.get(p)?.parentId) if (p === dragged.id) return true;
      return false;
    };
    const candidates = all.filter((n) => !inside(n.id));
    const target = containerAt(candidates, centre, containers);
    const current = dragged.parentId ?? null;
    if ((target?.id ?? null) === current) return;
    const parentAbs = target ? absolutePosition(byId.get(target.id)!, byId) : { x: 0, y: 0 };
    reparent(dragged.id, target?.id ?? null, { x: abs.x - parentAbs.x, y: abs.y - parentAbs.y });
  }, [containers, reparent]);

  const onError = useCallback((code: string, message: string) => {
    // An edge whose handle the config no longer has is the checklist's business
    // (unknown_handle); React Flow would only log it.
    if (code !== '008') setMessage(message);
  }, [setMessage]);

  return (
    <div className="canvas" data-testid="canvas" ref={box} onDragOver={onDragOver} onDrop={onDrop}>
      <ReactFlow<CanvasNode, FlowEdge>
        nodes={nodes} edges={shownEdges} nodeTypes={nodeTypes}
        onNodesChange={onNodesChange} onEdgesChange={onEdgesChange} onConnect={onConnect}
        isValidConnection={isValidConnection} onConnectEnd={onConnectEnd} ariaLabelConfig={ariaLabels} deleteKeyCode={null} connectOnClick={false}
        onNodeClick={() => setPanel('config')} onError={onError} onNodeDragStop={onNodeDragStop}
        multiSelectionKeyCode={['Meta', 'Control', 'Shift']} selectionKeyCode="Shift"
        minZoom={0.1} maxZoom={2} onlyRenderVisibleElements={nodes.length > 120}
        defaultEdgeOptions={{ type: 'smoothstep' }} onMoveStart={onMoveStart} fitViewOptions={fitOptions()}>
        <Background gap={16} />
        {mini && <MiniMap pannable zoomable data-testid="minimap" style={mini} />}
        {minimapSize(size.width, size.height) && (
          <button type="button" className="minimap-toggle" data-testid="minimap-toggle" aria-pressed={minimapOn}
            title={tr(minimapOn ? 'canvas.minimapHide' : 'canvas.minimapShow')}
            style={{ bottom: mini ? mini.height + 18 : 12 }} onClick={toggleMinimap}>{minimapOn ? '▾' : '▴'}</button>
        )}
        <Controls showInteractive={false} onZoomIn={stopFollowing} onZoomOut={stopFollowing} onFitView={follow} />
        <FitOnOpen />
      </ReactFlow>
      <QuickAdd />
    </div>
  );
}
