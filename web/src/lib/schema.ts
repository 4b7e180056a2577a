/**
 * Reading the config JSON Schemas of the catalog (GET /v1/node-kinds): resolving
 * `$ref`s, telling what a field holds, and building a node's first config from the
 * schema's defaults and required fields, so nothing about a kind is written here.
 */
import type { Json, JsonObject } from './workflow';

export interface JSONSchema {
  $ref?: string;
  $defs?: Record<string, JSONSchema>;
  type?: string | string[];
  title?: string;
  description?: string;
  default?: Json;
  enum?: Json[];
  const?: Json;
  properties?: Record<string, JSONSchema>;
  required?: string[];
  items?: JSONSchema;
  additionalProperties?: boolean | JSONSchema;
  anyOf?: JSONSchema[];
  oneOf?: JSONSchema[];
  allOf?: JSONSchema[];
  minItems?: number;
  minLength?: number;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  pattern?: string;
  [key: string]: unknown;
}

/** `schema` with its `$ref` (into `root.$defs`) followed, sibling keys kept. */
export function resolve(schema: JSONSchema | undefined, root: JSONSchema): JSONSchema {
  let cur = schema ?? {};
  for (let guard = 0; cur.$ref && guard < 32; guard += 1) {
    const name = cur.$ref.replace(/^#\/\$defs\//, '');
    const { $ref: _ref, ...rest } = cur;
    cur = { ...(root.$defs?.[name] ?? {}), ...rest };
  }
  return cur;
}

/** The non-null alternatives of `anyOf`/`oneOf` (a nullable field's real type), resolved. */
export function alternatives(schema: JSONSchema, root: JSONSchema): JSONSchema[] {
  const s = resolve(schema, root);
  const alts = s.anyOf ?? s.oneOf;
  if (!alts) return [s];
  return alts.map((a) => resolve(a, root)).filter((a) => a.type !== 'null');
}

/** True when `schema` accepts null (an optional field whose "unset" is null). */
export function nullable(schema: JSONSchema, root: JSONSchema): boolean {
  const s = resolve(schema, root);
  return (s.anyOf ?? s.oneOf ?? []).some((a) => resolve(a, root).type === 'null') || s.type === 'null';
}

/** True for the schema of a structured reference `{"ref": "..."}`. */
export function isRefSchema(schema: JSONSchema, root: JSONSchema): boolean {
  const s = resolve(schema, root);
  const keys = Object.keys(s.properties ?? {});
  return keys.length === 1 && keys[0] === 'ref' && (s.required ?? []).includes('ref');
}

/** `cases` -> `case`, `categories` -> `category`: what one item of a list is called. */
export function singular(name: string): string {
  if (name.endsWith('ies')) return `${name.slice(0, -3)}y`;
  if (name.endsWith('s') && !name.endsWith('ss')) return name.slice(0, -1);
  return name || 'item';
}

/**
 * The first value of a new field: its default, else an empty value of its type
 * (required arrays get `minItems` items, each built from the item schema; an item's
 * `id` is `<item name>_<n>`, e.g. `case_1`). A value of any type (a literal or a
 * reference) starts as an empty reference, which the variable picker fills.
 */
export function initialValue(schema: JSONSchema, root: JSONSchema, name = '', index = 0, owner = ''): Json {
  const s = resolve(schema, root);
  if (s.default !== undefined) return structuredClone(s.default);
  const [first] = alternatives(s, root);
  const t = (Array.isArray(first?.type) ? first.type[0] : first?.type) ?? (first?.properties ? 'object' : undefined);
  if (first?.enum?.length) return first.enum[0];
  if (first && isRefSchema(first, root)) return { ref: '' };
  switch (t) {
    case 'object':
      return initialObject(first, root, index, owner || name);
    case 'array': {
      const n = first.minItems ?? 0;
      return Array.from({ length: n }, (_, i) => initialValue(first.items ?? {}, root, singular(name), i, singular(name)));
    }
    case 'string':
      if (name === 'id' || first.pattern) return `${owner || name || 'item'}_${index + 1}`;
      return first.minLength ? `${owner || name || 'item'} ${index + 1}` : '';
    case 'number':
    case 'integer':
      return first.minimum ?? (first.exclusiveMinimum !== undefined ? first.exclusiveMinimum + 1 : 0);
    case 'boolean':
      return false;
    default:
      return first && !first.properties && !first.items && !first.enum ? { ref: '' } : null;
  }
}

/** An object of `schema`'s required properties with their first values (`owner`: what
 * the object is, for its id). */
export function initialObject(schema: JSONSchema, root: JSONSchema, index = 0, owner = ''): JsonObject {
  const s = resolve(schema, root);
  const out: JsonObject = {};
  for (const key of s.required ?? []) {
    out[key] = initialValue(s.properties?.[key] ?? {}, root, key, index, owner);
  }
  return out;
}

/**
 * The model a new node's `model` field starts on: the one the workflow already uses when
 * the registry has it (one workflow usually runs on one model), else the registry's
 * `default`, else its first name; '' when the registry is empty (an honest "unset",
 * which validation flags, rather than a made-up name that looks chosen).
 */
export function startingModel(registry: string[], used: string[] = []): string {
  const known = used.find((m) => m && (registry.length === 0 || registry.includes(m)));
  if (known) return known;
  if (registry.includes('default')) return 'default';
  return registry[0] ?? '';
}

/** A readable label for a field: its title, else its name with spaces. */
export function fieldLabel(name: string, schema: JSONSchema): string {
  return schema.title ?? name.replace(/_+/g, ' ').replace(/^\w/, (c) => c.toUpperCase());
}
