/**
 * Palette search: does a node kind match what the builder typed?
 *
 * A kind is found by its id, title, description and category, in English and in the UI
 * language (the catalog's `labels[lang]`, the category's label from the UI strings), and
 * by the names and titles of its config fields: a builder looking for "condition" means
 * the If / else kind even though its description speaks of cases (its cases hold
 * `conditions`). Every word of the query must appear somewhere (case-insensitive), so
 * "if else" finds "If / else" and "http get" narrows rather than widens.
 */
import type { NodeKind } from '../api/types';
import type { JSONSchema } from './schema';

export type SearchableKind = Pick<NodeKind, 'kind' | 'title' | 'description' | 'category' | 'labels' | 'config_schema'>;

/** The config field names and titles of `schema`, its `$defs` included (one level of each). */
function fieldWords(schema: JSONSchema): string[] {
  const out: string[] = [];
  for (const part of [schema, ...Object.values(schema.$defs ?? {})]) {
    for (const [name, prop] of Object.entries(part.properties ?? {})) out.push(name, prop.title ?? '');
  }
  return out;
}

/** Everything `kind` can be found by in `lang`, lower-cased (`categoryLabel`: the category's UI name). */
export function searchText(kind: SearchableKind, lang: string, categoryLabel = ''): string {
  const label = kind.labels?.[lang];
  return [
    kind.kind, kind.kind.replace(/_/g, ' '), kind.title, kind.description, kind.category, categoryLabel,
    label?.title ?? '', label?.description ?? '', ...Object.values(label?.fields ?? {}),
    ...fieldWords((kind.config_schema ?? {}) as JSONSchema),
  ].join('\n').toLowerCase();
}

/** True when every word of `query` (trimmed, case-insensitive) is in `kind`'s {@link searchText}; an empty query matches all. */
export function kindMatches(kind: SearchableKind, query: string, lang: string, categoryLabel = ''): boolean {
  const words = query.trim().toLowerCase().split(/\s+/).filter(Boolean);
  if (words.length === 0) return true;
  const text = searchText(kind, lang, categoryLabel);
  return words.every((w) => text.includes(w));
}
