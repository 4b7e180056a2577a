/**
 * A config field's label in the builder's language. The server's catalog carries, per
 * kind and language, the titles of the property names the kind's config schema uses
 * (`labels[lang].fields`, root and `$defs`), and the titles of the fields every node has
 * (`node_field_labels`); English is the schema's own title. Enum values get labels the
 * same way (`labels[lang].values`, `node_value_labels`); English shows the value itself,
 * and the stored value is always the enum's own. No field is named here; a name or language the catalog lacks falls back to English.
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

/** The labels in `lang` of the enum values `kind`'s config schema offers (value -> label). */
export function kindValueLabels(kind: Pick<NodeKind, 'labels'> | undefined, lang: string): FieldTitles {
  return kind?.labels?.[lang]?.values ?? NONE;
}

/** What a select shows for enum value `value`: its label in `labels`, else the value. */
export function localValueLabel(value: unknown, labels: FieldTitles): string {
  return typeof value === 'string' && Object.hasOwn(labels, value) ? labels[value] : String(value);
}

/** The help of `kind`'s config fields in `lang` (English help -> help; none for a language it lacks). */
export function kindFieldHelp(kind: Pick<NodeKind, 'labels'> | undefined, lang: string): FieldTitles {
  return kind?.labels?.[lang]?.help ?? NONE;
}

/** What a field's help says in the UI language: `help[english]`, else the English help. */
export function localHelp(english: string, help: FieldTitles): string {
  return Object.hasOwn(help, english) ? help[english] : english;
}
