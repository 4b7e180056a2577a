import { describe, expect, it } from 'vitest';
import { layoutGraph } from './layout';

describe('auto-layout', () => {
  const size = { width: 200, height: 90 };
  it('test_chain_is_laid_out_left_to_right_without_overlap', () => {
    const pos = layoutGraph([{ id: 'a', ...size }, { id: 'b', ...size }, { id: 'c', ...size }],
      [{ source: 'a', target: 'b' }, { source: 'b', target: 'c' }]);
    expect(pos.get('a')!.x).toBeLessThan(pos.get('b')!.x);
    expect(pos.get('b')!.x - pos.get('a')!.x).toBeGreaterThanOrEqual(200);
    expect(pos.get('a')).toEqual({ x: 0, y: 0 });
  });

  it('test_branches_are_stacked', () => {
    const pos = layoutGraph([{ id: 'a', ...size }, { id: 'b', ...size }, { id: 'c', ...size }],
      [{ source: 'a', target: 'b' }, { source: 'a', target: 'c' }]);
    expect(pos.get('b')!.x).toBe(pos.get('c')!.x);
    expect(Math.abs(pos.get('b')!.y - pos.get('c')!.y)).toBeGreaterThanOrEqual(90);
  });

  it('test_body_nodes_are_placed_inside_their_container', () => {
    const pos = layoutGraph([{ id: 'loop', width: 500, height: 300 }, { id: 'x', parent: 'loop', ...size },
      { id: 'y', parent: 'loop', ...size }], [{ source: 'x', target: 'y' }]);
    expect(pos.get('x')!.x).toBeGreaterThan(0);
    expect(pos.get('x')!.y).toBeGreaterThan(0);
    expect(pos.get('y')!.x).toBeGreaterThan(pos.get('x')!.x);
  });

  it('test_cycles_do_not_break_layout', () => {
    const pos = layoutGraph([{ id: 'a', ...size }, { id: 'b', ...size }], [{ source: 'a', target: 'b' }, { source: 'b', target: 'a' }]);
    expect(pos.size).toBe(2);
  });

  it('test_two_hundred_nodes_lay_out_quickly', () => {
    const nodes = Array.from({ length: 200 }, (_, i) => ({ id: `n${i}`, ...size }));
    const edges = nodes.slice(1).map((n, i) => ({ source: `n${Math.floor(i / 2)}`, target: n.id }));
    const t0 = performance.now();
    const pos = layoutGraph(nodes, edges);
    expect(pos.size).toBe(200);
    expect(performance.now() - t0).toBeLessThan(3000);
  });
});
