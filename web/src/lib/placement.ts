/**
 * Where a node added from another one goes: beside it (to its right, after a gap), in
 * the first free place at or below that spot, so it never lands on top of a node already
 * there (a second branch of a router, a node moved into the way). Pure: positions and
 * sizes in, a position out.
 *
 * Boxes are in the coordinates of one parent (the canvas, or one container's body):
 * only siblings can overlap.
 */
import type { Position } from './workflow';

export interface Box {
  x: number;
  y: number;
  width: number;
  height: number;
}

/** The gap kept between the source node and the new one, and between stacked nodes (px). */
export const GAP_X = 80;
export const GAP_Y = 30;

function overlaps(a: Box, b: Box): boolean {
  return a.x < b.x + b.width + GAP_Y && b.x < a.x + a.width + GAP_Y
    && a.y < b.y + b.height + GAP_Y && b.y < a.y + a.height + GAP_Y;
}

/** The first spot at or below `want` where a `size` box overlaps none of `others`
 * (each try moves below the box in the way; at most `others.length + 1` tries). */
export function freeSpot(want: Position, size: { width: number; height: number }, others: Box[]): Position {
  let spot = { ...want };
  for (let i = 0; i <= others.length; i += 1) {
    const box = { ...spot, ...size };
    const blocking = others.filter((o) => overlaps(box, o));
    if (!blocking.length) return spot;
    spot = { x: spot.x, y: Math.max(...blocking.map((o) => o.y + o.height)) + GAP_Y };
  }
  return spot;
}

/** The spot of a node added from `from` (beside it, `index`: its how-manieth next node). */
export function besideSpot(from: Box, index: number, size: { width: number; height: number }, others: Box[]): Position {
  return freeSpot({ x: from.x + from.width + GAP_X, y: from.y + index * (size.height + GAP_Y) }, size, others);
}
