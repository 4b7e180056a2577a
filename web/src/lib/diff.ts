/**
 * What changed between two workflow documents (two published versions, or a version and
 * the draft), as a typed list of changes the Versions panel shows grouped by node:
 *
 * - `node_added` / `node_removed`: `{ node: {id, type, title} }`
 * - `node_changed`: the node and its changed fields, each `{ path, before, after }` with
 *   a path down to the leaf that differs (`config.cases[0].conditions[1].right`, `name`)
 * - `node_moved`: only the position differs (listed only with `{ moves: true }`; a move
 *   changes nothing the engine runs, so it would drown the real changes)
 * - `edge_added` / `edge_removed`: `{ edge: {id, source, sourceHandle, target, targetHandle} }`
 * - `workflow_changed`: one field of the workflow itself (`name`, `inputs[0].type`,
 *   `variables`, `notes[1].text`, `limits.max_steps`, ...)
 *
 * `before` / `after` of a field are `undefined` when it is absent on that side.
 * Edges are matched by what they connect, not by id: an edge deleted and drawn again
 * between the same handles is the same edge to the builder.
 */
import { isRef, type Json, type Position, type WorkflowDoc, type WorkflowEdge, type WorkflowNode } from './workflow';

/** A JSON value, or `undefined` for a field absent on that side. */
export type Value = Json | undefined;

export interface FieldChange {
  path: string;
  before: Value;
  after: Value;
}

export interface NodeRef {
  id: string;
  type: string;
  /** The node's name, else its id. */
  title: string;
}

export interface EdgeEnds {
  id: string;
  source: string;
  sourceHandle: string;
  target: string;
  targetHandle: string;
}

export type Change =
  | { type: 'node_added'; node: NodeRef }
  | { type: 'node_removed'; node: NodeRef }
  | { type: 'node_changed'; node: NodeRef; fields: FieldChange[]; moved: boolean }
  | { type: 'node_moved'; node: NodeRef; before?: Position; after?: Position }
  | { type: 'edge_added'; edge: EdgeEnds }
  | { type: 'edge_removed'; edge: EdgeEnds }
  | { type: 'workflow_changed'; field: FieldChange };

export interface DiffOptions {
  /** List nodes whose only change is their position (`node_moved`). */
  moves?: boolean;
}

/** Workflow fields that are bookkeeping, not content: the draft counter. */
const WORKFLOW_SKIP = new Set(['nodes', 'edges', 'version']);
/** A sticky note's layout: moving or resizing one is not a change of the workflow. */
const NOTE_LAYOUT = ['position', 'width', 'height'];

/** Deep equality of JSON values (key order ignored; a key set to undefined is absent). */
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

function isObject(v: unknown): v is Record<string, Json> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** `path.key`, or `path["odd key"]` for a key that is not an identifier. */
function joinKey(path: string, key: string): string {
  if (/^[A-Za-z_$][\w$]*$/.test(key)) return path ? `${path}.${key}` : key;
  return `${path}[${JSON.stringify(key)}]`;
}

/** Pushes onto `out` the leaf fields where `a` and `b` differ, below `path`. A reference
 * (`{"ref": ...}`) is one value: its `.ref` path would say less than the whole. */
function diffValue(path: string, a: Value, b: Value, out: FieldChange[]): void {
  if (a === b) return;
  if (isObject(a) && isObject(b) && !isRef(a) && !isRef(b)) {
    const keys = [...Object.keys(a), ...Object.keys(b).filter((k) => !Object.hasOwn(a, k))];
    for (const k of keys) diffValue(joinKey(path, k), a[k], b[k], out);
    return;
  }
  if (Array.isArray(a) && Array.isArray(b)) {
    diffArray(path, a, b, out);
    return;
  }
  if (!jsonEqual(a, b)) out.push({ path, before: a, after: b });
}

/** Arrays are compared item by item after setting aside the equal items at both ends,
 * so one item inserted or deleted in a list reads as that item added or removed rather
 * than every later item changed. Indices are those of the side the item is on. */
function diffArray(path: string, a: Json[], b: Json[], out: FieldChange[]): void {
  let start = 0;
  while (start < a.length && start < b.length && jsonEqual(a[start], b[start])) start += 1;
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && jsonEqual(a[endA - 1], b[endB - 1])) {
    endA -= 1;
    endB -= 1;
  }
  const paired = Math.min(endA, endB) - start;
  for (let i = start; i < start + paired; i += 1) diffValue(`${path}[${i}]`, a[i], b[i], out);
  for (let i = start + paired; i < endA; i += 1) out.push({ path: `${path}[${i}]`, before: a[i], after: undefined });
  for (let i = start + paired; i < endB; i += 1) out.push({ path: `${path}[${i}]`, before: undefined, after: b[i] });
}

/** The changed fields from `a` to `b` (paths rooted at `path`, '' for the top). */
export function diffFields(a: Value, b: Value, path = ''): FieldChange[] {
  const out: FieldChange[] = [];
  diffValue(path, a, b, out);
  return out;
}

/** An object without its null and undefined fields: the document uses null for "not
 * set" (`parent`, `timeout`, ...), which must not read as a change from absent. */
function dropUnset(o: Record<string, unknown>, skip: ReadonlySet<string> = new Set()): Record<string, Json> {
  const out: Record<string, Json> = {};
  for (const [k, v] of Object.entries(o)) {
    if (v !== null && v !== undefined && !skip.has(k)) out[k] = v as Json;
  }
  return out;
}

function nodeRef(n: WorkflowNode): NodeRef {
  return { id: n.id, type: n.type, title: n.name || n.id };
}

function diffNodes(before: WorkflowNode[], after: WorkflowNode[], moves: boolean): Change[] {
  const old = new Map(before.map((n) => [n.id, n]));
  const ids = new Set(after.map((n) => n.id));
  const changes: Change[] = [];
  for (const n of after) {
    const o = old.get(n.id);
    if (!o) {
      changes.push({ type: 'node_added', node: nodeRef(n) });
      continue;
    }
    const { position: pa, ...restA } = o;
    const { position: pb, ...restB } = n;
    const moved = !jsonEqual(pa ?? null, pb ?? null);
    const fields = diffFields(dropUnset(restA), dropUnset(restB));
    if (fields.length) changes.push({ type: 'node_changed', node: nodeRef(n), fields, moved });
    else if (moved && moves) changes.push({ type: 'node_moved', node: nodeRef(n), before: pa, after: pb });
  }
  for (const o of before) if (!ids.has(o.id)) changes.push({ type: 'node_removed', node: nodeRef(o) });
  return changes;
}

function edgeEnds(e: WorkflowEdge): EdgeEnds {
  return { id: e.id, source: e.source, sourceHandle: e.sourceHandle ?? 'out', target: e.target,
    targetHandle: e.targetHandle ?? 'in' };
}

function connectionKey(e: EdgeEnds): string {
  return JSON.stringify([e.source, e.sourceHandle, e.target, e.targetHandle]);
}

function diffEdges(before: WorkflowEdge[], after: WorkflowEdge[]): Change[] {
  const a = new Map(before.map((e) => { const x = edgeEnds(e); return [connectionKey(x), x]; }));
  const b = new Map(after.map((e) => { const x = edgeEnds(e); return [connectionKey(x), x]; }));
  const changes: Change[] = [];
  for (const [k, e] of b) if (!a.has(k)) changes.push({ type: 'edge_added', edge: e });
  for (const [k, e] of a) if (!b.has(k)) changes.push({ type: 'edge_removed', edge: e });
  return changes;
}

/** The workflow's own fields, compared: no nodes or edges, no draft counter, no note
 * layout; an empty list is the same as none (`inputs: []`). */
function workflowFields(doc: WorkflowDoc): Record<string, Json> {
  const out = dropUnset(doc as unknown as Record<string, unknown>, WORKFLOW_SKIP);
  for (const [k, v] of Object.entries(out)) if (Array.isArray(v) && v.length === 0) delete out[k];
  if (Array.isArray(out.notes)) {
    out.notes = out.notes.map((n) => (isObject(n)
      ? Object.fromEntries(Object.entries(n).filter(([k]) => !NOTE_LAYOUT.includes(k))) : n));
  }
  return out;
}

/** The changes from `before` to `after`: workflow fields first, then nodes in `after`'s
 * order (removed ones last), then edges. Empty when the documents do the same thing. */
export function diffWorkflows(before: WorkflowDoc, after: WorkflowDoc, options: DiffOptions = {}): Change[] {
  return [
    ...diffFields(workflowFields(before), workflowFields(after))
      .map((field): Change => ({ type: 'workflow_changed', field })),
    ...diffNodes(before.nodes, after.nodes, options.moves ?? false),
    ...diffEdges(before.edges, after.edges),
  ];
}

/** A value as text: a string as itself (an empty one as `""`), anything else as JSON. */
export function valueText(v: Value): string {
  if (v === undefined) return '';
  if (typeof v === 'string') return v === '' ? '""' : v;
  return JSON.stringify(v, null, isObject(v) || Array.isArray(v) ? 2 : undefined);
}

export interface Excerpt {
  text: string;
  /** True when `text` is not the whole value. */
  cut: boolean;
}

/** Short forms (about `max` characters) of two values' texts that show where they
 * differ: both start a little before their first differing character, so a long prompt
 * changed near its end shows the change, not the same opening twice. */
export function excerpts(before: string, after: string, max = 120): [Excerpt, Excerpt] {
  if (before.length <= max && after.length <= max) return [{ text: before, cut: false }, { text: after, cut: false }];
  let same = 0;
  const limit = Math.min(before.length, after.length);
  while (same < limit && before[same] === after[same]) same += 1;
  const from = Math.max(0, Math.min(same - Math.floor(max / 3), Math.max(before.length, after.length) - max));
  const cut = (s: string): Excerpt => {
    if (s.length <= max) return { text: s, cut: false };
    const start = Math.min(from, Math.max(0, s.length - max));
    const end = start + max;
    return { text: `${start > 0 ? '…' : ''}${s.slice(start, end)}${end < s.length ? '…' : ''}`, cut: true };
  };
  return [cut(before), cut(after)];
}
