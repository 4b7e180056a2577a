import { describe, expect, it } from 'vitest';
import {
  checkConnection, connectionToNode, handleKind, reaches, TOOL_TARGET_HANDLE, type GraphEdge, type GraphNode,
} from './connect';

const nodes: GraphNode[] = [
  { id: 'start', handles: ['out'] },
  { id: 'poll', handles: ['out'] },
  { id: 'check', handles: ['done', 'else'] },
  { id: 'report', handles: ['out'] },
  { id: 'loop', handles: ['out'] },
  { id: 'body1', parent: 'loop', handles: ['out'] },
  { id: 'body2', parent: 'loop', handles: ['out'] },
  { id: 'agent', handles: ['out'] },
  { id: 'tool_root', parent: 'agent', handles: ['out'] },
];
const edges: GraphEdge[] = [
  { source: 'start', target: 'poll', sourceHandle: 'out' },
  { source: 'poll', target: 'check', sourceHandle: 'out' },
  { source: 'check', target: 'report', sourceHandle: 'done' },
];

describe('connection rules', () => {
  it('test_plain_edge_forward_is_accepted', () => {
    expect(checkConnection({ source: 'report', target: 'loop', sourceHandle: 'out', targetHandle: 'in' }, nodes, edges))
      .toEqual({ ok: true, kind: 'flow' });
  });

  it('test_self_link_is_refused', () => {
    const v = checkConnection({ source: 'poll', target: 'poll', sourceHandle: 'out' }, nodes, edges);
    expect(v.ok).toBe(false);
  });

  it('test_unknown_source_handle_is_refused', () => {
    const v = checkConnection({ source: 'check', target: 'loop', sourceHandle: 'maybe' }, nodes, edges);
    expect(v).toMatchObject({ ok: false, reason: { code: 'no_handle', params: { node: 'check', handle: 'maybe' } } });
  });

  it('test_duplicate_edge_is_refused', () => {
    expect(checkConnection({ source: 'start', target: 'poll', sourceHandle: 'out' }, nodes, edges).ok).toBe(false);
  });

  it('test_cycle_from_single_handle_node_is_refused', () => {
    const v = checkConnection({ source: 'report', target: 'poll', sourceHandle: 'out' }, nodes, edges);
    expect(v).toMatchObject({ ok: false, reason: { code: 'cycle' } });
  });

  it('test_loop_back_from_branch_is_accepted', () => {
    expect(checkConnection({ source: 'check', target: 'poll', sourceHandle: 'else' }, nodes, edges))
      .toEqual({ ok: true, kind: 'flow', loopBack: true });
  });

  it('test_edge_crossing_container_boundary_is_refused', () => {
    const v = checkConnection({ source: 'report', target: 'body1', sourceHandle: 'out' }, nodes, edges);
    expect(v).toMatchObject({ ok: false, reason: { code: 'crosses_body' } });
    expect(checkConnection({ source: 'body1', target: 'body2', sourceHandle: 'out' }, nodes, edges).ok).toBe(true);
  });

  it('test_handle_kinds_must_match', () => {
    expect(checkConnection({ source: 'agent', target: 'tool_root', sourceHandle: 'tool:+', targetHandle: 'in' }, nodes, edges).ok)
      .toBe(false);
    expect(checkConnection({ source: 'agent', target: 'tool_root', sourceHandle: 'tool:+', targetHandle: 'tool:in' }, nodes, edges))
      .toEqual({ ok: true, kind: 'tool' });
  });

  it('test_tool_attaches_only_to_own_body_root', () => {
    expect(checkConnection({ source: 'agent', target: 'body1', sourceHandle: 'tool:x', targetHandle: 'tool:in' }, nodes, edges).ok)
      .toBe(false);
    const withIncoming = [...edges, { source: 'x', target: 'tool_root' }];
    expect(checkConnection({ source: 'agent', target: 'tool_root', sourceHandle: 'tool:x', targetHandle: 'tool:in' }, nodes,
      withIncoming).ok).toBe(false);
  });

  it('test_body_handle_moves_unconnected_nodes_into_the_body', () => {
    const graph: GraphNode[] = [...nodes, { id: 'lonely', handles: ['out'] }];
    expect(checkConnection({ source: 'loop', target: 'lonely', sourceHandle: 'body', targetHandle: 'in' }, graph, edges))
      .toEqual({ ok: true, kind: 'body' });
    expect(checkConnection({ source: 'loop', target: 'body1', sourceHandle: 'body', targetHandle: 'in' }, graph, edges).ok).toBe(true);
    expect(checkConnection({ source: 'loop', target: 'poll', sourceHandle: 'body', targetHandle: 'in' }, graph, edges))
      .toMatchObject({ ok: false, reason: { code: 'body_connected' } });
    const nested: GraphNode[] = [...graph, { id: 'inner', parent: 'loop', handles: ['out'] }];
    expect(checkConnection({ source: 'inner', target: 'loop', sourceHandle: 'body', targetHandle: 'in' }, nested, edges).ok).toBe(false);
  });

  it('test_handle_kind_by_prefix', () => {
    expect(handleKind('out')).toBe('flow');
    expect(handleKind('tool:search')).toBe('tool');
    expect(handleKind(null)).toBe('flow');
    expect(handleKind('body')).toBe('body');
  });

  it('test_back_edges_are_the_edges_on_a_cycle', async () => {
    const { backEdges } = await import('./connect');
    const loop = [{ id: 'a', source: 'start', target: 'poll' }, { id: 'b', source: 'poll', target: 'check' },
      { id: 'c', source: 'check', target: 'poll', sourceHandle: 'else' }, { id: 'd', source: 'check', target: 'report' }];
    expect([...backEdges(loop)].sort()).toEqual(['b', 'c']);
  });

  it('test_reaches_follows_edges', () => {
    expect(reaches(edges, 'start', 'report')).toBe(true);
    expect(reaches(edges, 'report', 'start')).toBe(false);
  });
});

describe('connectionToNode', () => {
  it('test_a_drop_on_a_body_targets_its_matching_input', () => {
    expect(connectionToNode({ node: 'a', handle: 'out', type: 'source' }, 'b'))
      .toEqual({ source: 'a', sourceHandle: 'out', target: 'b', targetHandle: 'in' });
    expect(connectionToNode({ node: 'a', handle: 'tool:+', type: 'source' }, 'b')?.targetHandle).toBe(TOOL_TARGET_HANDLE);
    expect(connectionToNode({ node: 'a', handle: 'in', type: 'target' }, 'b')).toBeNull();
  });

  it('test_a_drop_on_its_own_body_is_a_refused_self_link', () => {
    const conn = connectionToNode({ node: 'a', handle: 'out', type: 'source' }, 'a')!;
    const verdict = checkConnection(conn, [{ id: 'a', handles: ['out'] }], []);
    expect(verdict).toEqual({ ok: false, reason: { code: 'self_link' } });
  });
});
