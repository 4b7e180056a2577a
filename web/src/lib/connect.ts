/**
 * Which connections the canvas accepts, as pure functions of the graph.
 *
 * Handle kinds: `flow` handles (a node's output handles, and the one input `in`) make
 * edges of the document; `tool` handles (`tool:<name>` of a node with graph tools, and
 * `tool:+` to add one) attach a body node as a tool, which is config, not an edge; the
 * `body` handle of a container (iteration, loop) puts a node into its body (the node's
 * `parent`), also no edge. Tool handles join `tool:in`; flow and body handles join `in`.
 *
 * Body: the target must already be in this body, or be a node without edges that is not
 * the container or a container around it (moving a connected node would leave its
 * edges crossing the boundary).
 *
 * Flow edges: no self-links, no duplicates, both ends in the same body (edges may not
 * cross a container's boundary), the source handle must exist on the source node, and
 * no edge may close a cycle unless it leaves a branching node (a node with more than
 * one handle): the engine runs such a back-edge as a loop region whose other handles
 * are its exit. Whether the region is well formed (one entry, no other cycle inside)
 * is then the compiler's verdict, shown in the checklist.
 */

export type HandleKind = 'flow' | 'tool' | 'body';

export const TOOL_HANDLE_PREFIX = 'tool:';
export const NEW_TOOL_HANDLE = 'tool:+';
/** The input of a body node that a tool handle attaches to. */
export const TOOL_TARGET_HANDLE = 'tool:in';

/** The handle of a container that its body starts from. */
export const BODY_HANDLE = 'body';

/** The kind of a handle id. */
export function handleKind(handle: string | null | undefined): HandleKind {
  if (handle === BODY_HANDLE) return 'body';
  return (handle ?? '').startsWith(TOOL_HANDLE_PREFIX) ? 'tool' : 'flow';
}

export interface GraphNode {
  id: string;
  parent?: string | null;
  /** Output handles (flow), with `error` when the node has the error branch. */
  handles: string[];
}

export interface GraphEdge {
  source: string;
  target: string;
  sourceHandle?: string | null;
}

export interface Connection {
  source: string;
  target: string;
  sourceHandle?: string | null;
  targetHandle?: string | null;
}

/** Why a connection is refused: a code the UI words in the person's language
 * (`connect.<code>` in the dictionaries), with the names it mentions. */
export type RefusalCode = 'unknown_node' | 'self_link' | 'kind_mismatch' | 'body_input' | 'body_self' | 'body_connected'
  | 'tool_not_body' | 'tool_not_root' | 'no_handle' | 'target_not_input' | 'crosses_body' | 'duplicate' | 'cycle';

export interface Refusal {
  code: RefusalCode;
  params?: Record<string, string>;
}

export type Verdict = { ok: true; kind: HandleKind; loopBack?: boolean } | { ok: false; reason: Refusal };

function refuse(code: RefusalCode, params?: Record<string, string>): Verdict {
  return { ok: false, reason: params ? { code, params } : { code } };
}

/** True when `from` reaches `to` through `edges`. */
export function reaches(edges: readonly GraphEdge[], from: string, to: string): boolean {
  const out = new Map<string, string[]>();
  for (const e of edges) {
    const list = out.get(e.source);
    if (list) list.push(e.target);
    else out.set(e.source, [e.target]);
  }
  const seen = new Set<string>();
  const stack = [from];
  while (stack.length) {
    const id = stack.pop()!;
    if (id === to) return true;
    if (seen.has(id)) continue;
    seen.add(id);
    stack.push(...(out.get(id) ?? []));
  }
  return false;
}

/** Whether `conn` may be added to the graph, with the reason when not. */
export function checkConnection(conn: Connection, nodes: readonly GraphNode[], edges: readonly GraphEdge[]): Verdict {
  const source = nodes.find((n) => n.id === conn.source);
  const target = nodes.find((n) => n.id === conn.target);
  if (!source || !target) return refuse('unknown_node');
  if (source.id === target.id) return refuse('self_link');
  const kind = handleKind(conn.sourceHandle);
  const targetKind = handleKind(conn.targetHandle);
  if (kind !== targetKind && !(kind === 'body' && targetKind === 'flow')) {
    return refuse('kind_mismatch', { kind });
  }
  if (kind === 'body') {
    if ((conn.targetHandle ?? 'in') !== 'in') return refuse('body_input');
    if ((target.parent ?? null) === source.id) return { ok: true, kind };
    for (let p: string | null | undefined = source.id; p; p = nodes.find((n) => n.id === p)?.parent) {
      if (p === target.id) return refuse('body_self');
    }
    if (edges.some((e) => e.source === target.id || e.target === target.id)) {
      return refuse('body_connected');
    }
    return { ok: true, kind };
  }
  if (kind === 'tool') {
    if ((target.parent ?? null) !== source.id) return refuse('tool_not_body');
    if (edges.some((e) => e.target === target.id)) {
      return refuse('tool_not_root');
    }
    return { ok: true, kind };
  }
  const handle = conn.sourceHandle ?? 'out';
  if (!source.handles.includes(handle)) return refuse('no_handle', { node: source.id, handle });
  if ((conn.targetHandle ?? 'in') !== 'in') return refuse('target_not_input');
  if ((source.parent ?? null) !== (target.parent ?? null)) {
    return refuse('crosses_body');
  }
  if (edges.some((e) => e.source === source.id && e.target === target.id && (e.sourceHandle ?? 'out') === handle)) {
    return refuse('duplicate');
  }
  if (reaches(edges, target.id, source.id)) {
    if (source.handles.length > 1) return { ok: true, kind, loopBack: true };
    return refuse('cycle');
  }
  return { ok: true, kind };
}

/** Ids of the edges on a cycle (their target reaches their source): the loops drawn
 * with a back-edge, which the engine runs as loop regions; the canvas marks them. */
export function backEdges(edges: readonly (GraphEdge & { id: string })[]): Set<string> {
  const out = new Set<string>();
  for (const e of edges) if (e.source === e.target || reaches(edges, e.target, e.source)) out.add(e.id);
  return out;
}

/**
 * The connection meant by a drag dropped on a node's body rather than on a handle: from
 * the dragged output (or tool) handle to the node's matching input, so the drop is
 * checked, and refused with a reason, like one on the handle. Null when the drag started
 * at an input (a drop on a body names no output of it).
 */
export function connectionToNode(from: { node: string; handle: string | null; type: 'source' | 'target' },
  nodeId: string): Connection | null {
  if (from.type !== 'source') return null;
  const kind = handleKind(from.handle);
  return { source: from.node, sourceHandle: from.handle, target: nodeId,
    targetHandle: kind === 'tool' ? TOOL_TARGET_HANDLE : 'in' };
}
