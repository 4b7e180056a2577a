/**
 * Auto-layout with dagre, left to right: the top level and each container body are laid
 * out separately (a body's positions are relative to its container, as on the canvas).
 * Back-edges (loops drawn as edges) are left to dagre's cycle breaking.
 */
import { graphlib, layout as dagreLayout } from '@dagrejs/dagre';
import type { Position } from './workflow';

export interface LayoutNode {
  id: string;
  parent?: string | null;
  width: number;
  height: number;
}

export interface LayoutEdge {
  source: string;
  target: string;
}

const BODY_OFFSET = { x: 40, y: 80 };

/** Positions (top-left corners; body nodes relative to their container) for `nodes`. */
export function layoutGraph(nodes: readonly LayoutNode[], edges: readonly LayoutEdge[],
  opts: { rankSep?: number; nodeSep?: number } = {}): Map<string, Position> {
  const out = new Map<string, Position>();
  const groups = new Map<string | null, LayoutNode[]>();
  for (const n of nodes) {
    const key = n.parent ?? null;
    const list = groups.get(key);
    if (list) list.push(n);
    else groups.set(key, [n]);
  }
  for (const [parent, members] of groups) {
    const g = new graphlib.Graph();
    g.setGraph({ rankdir: 'LR', ranksep: opts.rankSep ?? 80, nodesep: opts.nodeSep ?? 40 });
    g.setDefaultEdgeLabel(() => ({}));
    const ids = new Set(members.map((m) => m.id));
    for (const m of members) g.setNode(m.id, { width: m.width, height: m.height });
    for (const e of edges) if (ids.has(e.source) && ids.has(e.target) && e.source !== e.target) g.setEdge(e.source, e.target);
    dagreLayout(g);
    const offset = parent === null ? { x: 0, y: 0 } : BODY_OFFSET;
    let minX = Infinity;
    let minY = Infinity;
    for (const m of members) {
      const p = g.node(m.id) as { x: number; y: number };
      minX = Math.min(minX, p.x - m.width / 2);
      minY = Math.min(minY, p.y - m.height / 2);
    }
    for (const m of members) {
      const p = g.node(m.id) as { x: number; y: number };
      out.set(m.id, { x: Math.round(p.x - m.width / 2 - minX + offset.x), y: Math.round(p.y - m.height / 2 - minY + offset.y) });
    }
  }
  return out;
}
