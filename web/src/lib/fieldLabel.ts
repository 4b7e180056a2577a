/**
 * A config field's label in the builder's language. The server's catalog carries, per
 * kind and language, the titles of the property names the kind's config schema uses
 * (`labels[lang].fields`, root and `$defs`), and the titles of the fields every node has
 * (`node_field_labels`); English is the schema's own title. No field is named here; a name or language the catalog lacks falls back to English.
 */
import type { NodeKind } from '../api/types';
import { fieldLabel, type JSONSchema } from './schema';

/** Property name -> title in one language. */
export type FieldTitles = Readonly<Record<string, string>>;

const NONE: FieldTitles = Object.freeze({});

/** The titles in `lang` of the fields of `kind`'s config schema (none for a language it lacks). */
export function kindFieldTitles(kind: Pick<NodeKind, 'labels'> | undefined, lang: string): FieldTitles {
  return kind?.labels?.[lang]?.fields ?? NONE;
}

/** The titles in `lang` of the fields every node has (the catalog's `node_field_labels`). */
export function nodeFieldTitles(labels: Readonly<Record<string, Record<string, string>>>, lang: string): FieldTitles {
  return labels[lang] ?? NONE;
}

/** The label of field `name`: its title in `titles`, else the English {@link fieldLabel}. */
export function localFieldLabel(name: string, schema: JSONSchema, titles: FieldTitles): string {
  return Object.hasOwn(titles, name) ? titles[name] : fieldLabel(name, schema);
}
