/**
 * A one-line summary of what a node does, shown under its title on the canvas (an LLM
 * node's model, an HTTP node's method and URL, a router's number of branches).
 *
 * Read from the node's config and its kind's config schema, so no kind is named here:
 * - a string `model` field: its value;
 * - `url` (with `method`, or the schema's default method): `GET host/path`, without the
 *   query string or user info of the URL (where API keys tend to be put);
 * - each array field whose items carry an `id` that names an output handle (the rule of
 *   lib/shape.ts: cases, categories, options): its count, `{count} {field}` through i18n,
 *   the field named by the catalog's label in the UI language;
 * - a `datasets` array of ids (a knowledge search): the datasets' names (`datasetName`;
 *   the id while the name is not known), comma-separated.
 * Parts are joined with ` · ` and cut at {@link SUMMARY_MAX} characters. A value that
 * holds a secret reference (`{{secret:...}}`) is never shown; header values are never read.
 */
import type { NodeKind } from '../api/types';
import { resolve, singular, type JSONSchema } from './schema';
import { branchFields } from './shape';
import type { JsonObject } from './workflow';

/** Longest summary (characters, the ellipsis included): one line of a 200px node. */
export const SUMMARY_MAX = 40;

/** Fills an i18n template; `key` is always `node.summary.count` here. */
export type Translate = (key: 'node.summary.count', params: Record<string, string | number>) => string;

const SECRET = /\{\{\s*secret:/i;

function shown(value: unknown): string | null {
  if (typeof value !== 'string') return null;
  const text = value.trim().replace(/\s+/g, ' ');
  return text && !SECRET.test(text) ? text : null;
}

/** `url` without scheme, user info and query string/fragment (they may carry credentials). */
function shortUrl(url: string): string {
  return url.replace(/^[a-z][a-z0-9+.-]*:\/\//i, '').replace(/^[^/@]*@/, '').replace(/[?#].*$/, '');
}

/** What `key` is called in `lang`: the catalog's label, else its English title (singular for one). */
function fieldName(key: string, prop: JSONSchema, kind: Pick<NodeKind, 'labels'>, lang: string, count: number): string {
  const label = kind.labels?.[lang]?.fields?.[key];
  if (label) return label;
  const english = (prop.title ?? key.replace(/_/g, ' ')).toLowerCase();
  return count === 1 ? singular(english) : english;
}

/** The summary of a node with `config` of `kind` in `lang` ('' when there is nothing to say). */
export function nodeSummary(config: JsonObject | undefined, kind: Pick<NodeKind, 'config_schema' | 'labels'> | undefined,
  lang: string, t: Translate, datasetName: (id: string) => string | undefined = () => undefined): string {
  if (!config || !kind) return '';
  const root = (kind.config_schema ?? {}) as JSONSchema;
  const parts: string[] = [];
  const model = shown(config.model);
  if (model) parts.push(model);
  const url = shown(config.url);
  const method = shown(config.method) ?? shown(resolve(root.properties?.method, root).default);
  if (url && method) parts.push(`${method.toUpperCase()} ${shortUrl(url)}`);
  if (Array.isArray(config.datasets)) {
    const ids = config.datasets.map(shown).filter((id): id is string => id !== null);
    if (ids.length) parts.push(ids.map((id) => datasetName(id) ?? id).join(', '));
  }
  for (const [key, prop] of branchFields(root)) {
    const list = config[key];
    if (!Array.isArray(list) || list.length === 0) continue;
    parts.push(t('node.summary.count', { count: list.length, field: fieldName(key, prop, kind, lang, list.length) }));
  }
  const text = parts.join(' · ');
  return text.length > SUMMARY_MAX ? `${text.slice(0, SUMMARY_MAX - 1).trimEnd()}…` : text;
}
