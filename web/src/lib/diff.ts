/**
 * What changed between two workflow documents (a published version and the draft):
 * nodes and edges added, removed and changed (with the changed fields), and the
 * workflow's own settings (name, inputs, variables, limits, ...) that differ.
 */
import type { WorkflowDoc, WorkflowEdge, WorkflowNode } from './workflow';

export interface NodeChange {
  id: string;
  fields: string[];
}

export interface WorkflowDiff {
  nodesAdded: string[];
  nodesRemoved: string[];
  nodesChanged: NodeChange[];
  edgesAdded: string[];
  edgesRemoved: string[];
  edgesChanged: string[];
  settingsChanged: string[];
}

/** Deep equality of JSON values (key order ignored). */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const bb = b as unknown[];
    return a.length === bb.length && a.every((v, i) => jsonEqual(v, bb[i]));
  }
  const ka = Object.keys(a).filter((k) => (a as Record<string, unknown>)[k] !== undefined);
  const kb = Object.keys(b).filter((k) => (b as Record<string, unknown>)[k] !== undefined);
  return ka.length === kb.length
    && ka.every((k) => jsonEqual((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
}

function changedFields(a: object, b: object): string[] {
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  return [...keys].filter((k) => !jsonEqual((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k])).sort();
}

function edgeKey(e: WorkflowEdge): string {
  return `${e.source}:${e.sourceHandle ?? 'out'}->${e.target}:${e.targetHandle ?? 'in'}`;
}

/** The differences from `before` to `after`. */
export function diffWorkflows(before: WorkflowDoc, after: WorkflowDoc): WorkflowDiff {
  const a = new Map<string, WorkflowNode>(before.nodes.map((n) => [n.id, n]));
  const b = new Map<string, WorkflowNode>(after.nodes.map((n) => [n.id, n]));
  const nodesChanged: NodeChange[] = [];
  for (const [id, n] of b) {
    const old = a.get(id);
    if (!old) continue;
    const fields = changedFields(old, n);
    if (fields.length) nodesChanged.push({ id, fields });
  }
  const ea = new Map(before.edges.map((e) => [e.id, e]));
  const eb = new Map(after.edges.map((e) => [e.id, e]));
  const { nodes: _n1, edges: _e1, ...metaA } = before;
  const { nodes: _n2, edges: _e2, ...metaB } = after;
  return {
    nodesAdded: [...b.keys()].filter((id) => !a.has(id)),
    nodesRemoved: [...a.keys()].filter((id) => !b.has(id)),
    nodesChanged,
    edgesAdded: [...eb.keys()].filter((id) => !ea.has(id)),
    edgesRemoved: [...ea.keys()].filter((id) => !eb.has(id)),
    edgesChanged: [...eb.keys()].filter((id) => ea.has(id) && edgeKey(ea.get(id)!) !== edgeKey(eb.get(id)!)),
    settingsChanged: changedFields(metaA, metaB).filter((k) => k !== 'version'),
  };
}

/** True when the diff lists nothing. */
export function isEmptyDiff(d: WorkflowDiff): boolean {
  return Object.values(d).every((v) => v.length === 0);
}
