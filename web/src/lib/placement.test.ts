import { describe, expect, it } from 'vitest';
import { besideSpot, freeSpot, GAP_X, GAP_Y } from './placement';

const size = { width: 200, height: 90 };

describe('placement', () => {
  it('test_a_node_goes_beside_its_source_when_the_place_is_free', () => {
    expect(besideSpot({ x: 0, y: 0, ...size }, 0, size, [{ x: 0, y: 0, ...size }])).toEqual({ x: 200 + GAP_X, y: 0 });
  });

  it('test_a_node_never_lands_on_one_already_there', () => {
    const taken = { x: 280, y: 0, ...size };
    const spot = besideSpot({ x: 0, y: 0, ...size }, 0, size, [taken]);
    expect(spot).toEqual({ x: 280, y: 90 + GAP_Y });
  });

  it('test_a_column_of_nodes_is_passed_below_the_last', () => {
    const column = [0, 1, 2].map((i) => ({ x: 280, y: i * 120, ...size }));
    const spot = freeSpot({ x: 280, y: 0 }, size, column);
    expect(spot.y).toBe(2 * 120 + 90 + GAP_Y);
  });

  it('test_nodes_far_to_the_side_do_not_move_it', () => {
    expect(freeSpot({ x: 0, y: 0 }, size, [{ x: 600, y: 0, ...size }])).toEqual({ x: 0, y: 0 });
  });
});
