/**
 * References inside node configs: structured `{"ref": "..."}` values and the names
 * templates read (`{{ node.output }}`, `{{ nodes["id"].output }}`). Used to spell a
 * reference, to find the nodes a node reads, and to follow a rename of a node id or
 * of an output (or flag the readers of a deleted node).
 */
import { isRef, type Json, type WorkflowNode } from './workflow';

/** Reference scopes that are not node ids. */
export const SCOPES = new Set(['inputs', 'sys', 'vars', 'conversation', 'nodes']);

const IDENT = /^[A-Za-z_][A-Za-z0-9_]*$/;

function quoteKey(key: string): string {
  return key.includes('"') ? `['${key}']` : `["${key}"]`;
}

/** The reference text of `output` of node `nodeId`: `node.output`, `nodes["a b"].output`,
 * `node["1"]` for output names that are not identifiers. */
export function refPath(nodeId: string, output?: string): string {
  const head = IDENT.test(nodeId) && !SCOPES.has(nodeId) ? nodeId : `nodes${quoteKey(nodeId)}`;
  if (output === undefined) return head;
  return IDENT.test(output) ? `${head}.${output}` : `${head}${quoteKey(output)}`;
}

/** The node id a reference path starts with (null for inputs/sys/vars or unreadable text). */
export function refNode(path: string): string | null {
  const m = path.match(/^\s*nodes\[(["'])(.*?)\1\]/);
  if (m) return m[2];
  const head = path.match(/^\s*([^.[\s]+)/)?.[1] ?? null;
  return head && !SCOPES.has(head) ? head : null;
}

/** A reference path cut after its node and after its output: `{node, output, rest}`
 * (`search.json.items[0]` -> `search`, `json`, `.items[0]`); null for inputs/sys/vars. */
export function splitRef(path: string): { node: string; output: string | null; rest: string } | null {
  const node = refNode(path);
  if (node === null) return null;
  const afterNode = path.replace(/^\s*(nodes\[(["']).*?\2\]|[^.[\s]+)/, '');
  const m = afterNode.match(/^\.([^.[\s]+)|^\[(["'])(.*?)\2\]/);
  if (!m) return { node, output: null, rest: afterNode };
  return { node, output: m[1] ?? m[3], rest: afterNode.slice(m[0].length) };
}

/** The output a reference path reads right after its node (null when none). */
export function refOutput(path: string): string | null {
  return splitRef(path)?.output ?? null;
}

function escapeRe(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** Node-read patterns in template text: `id.` / `id[` as a word, and `nodes["id"]`. */
function nodePattern(id: string): RegExp {
  const quoted = `nodes\\[(["'])${escapeRe(id)}\\1\\]`;
  return IDENT.test(id) ? new RegExp(`${quoted}|(?<![\\w.])${escapeRe(id)}(?=\\s*[.[])`, 'g') : new RegExp(quoted, 'g');
}

function templateParts(text: string): { code: boolean; text: string }[] {
  const parts: { code: boolean; text: string }[] = [];
  const re = /(\{\{[\s\S]*?\}\}|\{%[\s\S]*?%\})/g;
  let last = 0;
  for (const m of text.matchAll(re)) {
    if (m.index! > last) parts.push({ code: false, text: text.slice(last, m.index) });
    parts.push({ code: true, text: m[0] });
    last = m.index! + m[0].length;
  }
  if (last < text.length) parts.push({ code: false, text: text.slice(last) });
  return parts;
}

/** True when template `text` reads node `id`. */
export function templateReads(text: string, id: string): boolean {
  return templateParts(text).some((p) => p.code && nodePattern(id).test(p.text));
}

function mapConfig(value: Json, fn: { ref: (path: string) => string; text: (text: string) => string }): Json {
  if (isRef(value)) return { ref: fn.ref(value.ref) };
  if (typeof value === 'string') return fn.text(value);
  if (Array.isArray(value)) return value.map((v) => mapConfig(v, fn));
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, mapConfig(v, fn)]));
  }
  return value;
}

function replaceHead(path: string, oldId: string, newId: string): string {
  const parts = splitRef(path);
  if (!parts || parts.node !== oldId) return path;
  return (parts.output === null ? refPath(newId) : refPath(newId, parts.output)) + parts.rest;
}

/** `config` with every read of node `oldId` (references and template text) made a read of `newId`. */
export function renameNodeInConfig(config: Json, oldId: string, newId: string): Json {
  return mapConfig(config, {
    ref: (path) => replaceHead(path, oldId, newId),
    text: (text) => templateParts(text).map((p) => (p.code
      ? p.text.replace(nodePattern(oldId), () => refPath(newId)) : p.text)).join(''),
  });
}

/** `config` with reads of `nodeId`'s output `oldOut` made reads of `newOut`. */
export function renameOutputInConfig(config: Json, nodeId: string, oldOut: string, newOut: string): Json {
  const oldText = refPath(nodeId, oldOut);
  const newText = refPath(nodeId, newOut);
  const re = new RegExp(`${escapeRe(oldText)}(?![\\w])`, 'g');
  return mapConfig(config, {
    ref: (path) => {
      const parts = splitRef(path);
      return parts && parts.node === nodeId && parts.output === oldOut ? newText + parts.rest : path;
    },
    text: (text) => templateParts(text).map((p) => (p.code ? p.text.replace(re, newText) : p.text)).join(''),
  });
}

/** True when `node`'s config reads node `id` (a reference or a template read). */
export function nodeReads(node: Pick<WorkflowNode, 'config'>, id: string): boolean {
  let found = false;
  const visit = (v: Json): void => {
    if (found) return;
    if (isRef(v)) found = refNode(v.ref) === id;
    else if (typeof v === 'string') found = templateReads(v, id);
    else if (Array.isArray(v)) v.forEach(visit);
    else if (v && typeof v === 'object') Object.values(v).forEach(visit);
  };
  visit((node.config ?? {}) as Json);
  return found;
}

/** Every structured reference path in `config`. */
export function structuredRefs(config: Json): string[] {
  const out: string[] = [];
  const visit = (v: Json): void => {
    if (isRef(v)) out.push(v.ref);
    else if (Array.isArray(v)) v.forEach(visit);
    else if (v && typeof v === 'object') Object.values(v).forEach(visit);
  };
  visit(config);
  return out;
}
