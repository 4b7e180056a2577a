/**
 * A config field's label in the builder's language. The server's catalog carries, per
 * kind and language, the titles of the property names the kind's config schema uses
 * (`labels[lang].fields`, root and `$defs`); English is the schema's own title. No field
 * is named here; a name or language the catalog lacks falls back to English.
 */
import type { NodeKind } from '../api/types';
import { fieldLabel, type JSONSchema } from './schema';

/** Property name -> title in one language. */
export type FieldTitles = Readonly<Record<string, string>>;

const NONE: FieldTitles = Object.freeze({});

/**
 * The field titles in `lang` of the kind whose config schema `schema` is. The config
 * form is given the catalog's schema object itself, so the kind is found by identity;
 * other forms (the node's execution policy) belong to no kind and get none.
 */
export function kindFieldTitles(kinds: readonly Pick<NodeKind, 'config_schema' | 'labels'>[],
  schema: JSONSchema, lang: string): FieldTitles {
  const kind = kinds.find((k) => k.config_schema === schema);
  return kind?.labels?.[lang]?.fields ?? NONE;
}

/** The label of field `name`: its title in `titles`, else the English {@link fieldLabel}. */
export function localFieldLabel(name: string, schema: JSONSchema, titles: FieldTitles): string {
  return Object.hasOwn(titles, name) ? titles[name] : fieldLabel(name, schema);
}
