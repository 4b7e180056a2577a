import { describe, expect, it } from 'vitest';
import { itemGroups } from './TraceParts';
import type { NodeRunOut } from '../api/types';

const run = (over: Partial<NodeRunOut>): NodeRunOut => ({ ...over, id: over.id ?? 'x', node_id: over.node_id ?? 'n',
  kind: over.kind ?? 'template', status: over.status ?? 'succeeded', attempts: over.attempts ?? 1,
  retries: over.retries ?? 0, waited_s: over.waited_s ?? 0 });

describe('itemGroups', () => {
  it('reads an iteration\'s items from its records, with durations from the body runs\' times', () => {
    const container = run({ node_id: 'each', kind: 'iteration', data: { items: [
      { index: 1, status: 'failed', error: { type: 'NodeFailed', message: 'boom', node_id: 'b' }, node_runs: [run({ node_id: 'b', status: 'failed', started_at: 5, finished_at: 5.5 })] },
      { index: 0, status: 'succeeded', node_runs: [run({ node_id: 'a', started_at: 1, finished_at: 1.25 }),
        run({ node_id: 'b', started_at: 1.25, finished_at: 2 })] },
    ] } });
    const groups = itemGroups(container, []);
    expect(groups.map((g) => [g.index, g.status, g.duration, g.runs.length, g.error])).toEqual([
      [0, 'succeeded', 1, 2, undefined], [1, 'failed', 0.5, 1, 'boom']]);
    expect(groups[0].runs[0].duration_s).toBe(0.25);
  });

  it('groups the body runs listed apart (a loop drawn with back-edges) by round', () => {
    const region = run({ node_id: 'poll~loop', kind: 'loop_region', data: { round_count: 2 } });
    const body = [run({ node_id: 'poll', iteration: 0, duration_s: 0.1 }), run({ node_id: 'check', iteration: 0 }),
      run({ node_id: 'poll', iteration: 1, status: 'failed' })];
    expect(itemGroups(region, body).map((g) => [g.index, g.status, g.runs.map((r) => r.node_id)])).toEqual([
      [0, 'succeeded', ['poll', 'check']], [1, 'failed', ['poll']]]);
  });
});
