/**
 * The output handles and outputs of configured nodes, as the server states them.
 *
 * `POST /v1/workflows/validate` answers, next to the problems, each node's handles and
 * typed outputs (`nodes`: every node whose own fields are valid, whatever else is wrong);
 * the catalog gives each kind's defaults. A node whose fields are invalid has no entry:
 * until it is fixed its handles come from its config (array items with an `id` described
 * as a handle: cases, categories, options) or the kind's defaults.
 */
import type { NodeKind, Problem, WorkflowProblems } from '../api/types';
import { resolve, type JSONSchema } from './schema';
import type { WorkflowNode } from './workflow';

export interface Shapes {
  handles: Record<string, string[]>;
  outputs: Record<string, string[]>;
  /** Node id -> output name -> type name, where the server knows them. */
  types?: Record<string, Record<string, string>>;
}

export const emptyShapes: Shapes = { handles: {}, outputs: {}, types: {} };

/** The shapes in a validate answer (`nodes`). */
export function shapesOf(answer: Pick<WorkflowProblems, 'nodes'>): Shapes {
  const shapes: Shapes = { handles: {}, outputs: {}, types: {} };
  for (const [id, shape] of Object.entries(answer.nodes ?? {})) {
    shapes.handles[id] = shape.handles;
    if (shape.outputs) {
      shapes.outputs[id] = Object.keys(shape.outputs);
      shapes.types![id] = shape.outputs;
    }
  }
  return shapes;
}

/** The array fields of a config schema whose items are the node's branches: items with
 * an `id` described as a handle (cases, categories, options), as `[name, resolved schema]`. */
export function branchFields(root: JSONSchema): [string, JSONSchema][] {
  const out: [string, JSONSchema][] = [];
  for (const [key, prop] of Object.entries(root.properties ?? {})) {
    const p = resolve(prop, root);
    const item = p.type === 'array' ? resolve(p.items, root) : null;
    if (item?.properties?.id && /handle/i.test(`${item.description ?? ''} ${p.description ?? ''}`)) out.push([key, p]);
  }
  return out;
}

/** Handles named by the config itself (see the module docstring). */
export function configHandles(node: Pick<WorkflowNode, 'config'>, kind: NodeKind | undefined): string[] | null {
  const root = (kind?.config_schema ?? {}) as JSONSchema;
  const config = node.config ?? {};
  const found: string[] = [];
  const branches = branchFields(root);
  const named = branches.length > 0;
  for (const [key] of branches) {
    const values = config[key];
    if (!Array.isArray(values)) continue;
    for (const v of values) {
      if (v && typeof v === 'object' && !Array.isArray(v) && typeof v.id === 'string') found.push(v.id);
    }
  }
  if (named) {
    if (/``else``/.test(root.description ?? '')) found.push('else');
    return found;
  }
  const own = config.handles;
  if (Array.isArray(own) && own.every((h) => typeof h === 'string') && 'handles' in (root.properties ?? {})) {
    return own as string[];
  }
  return null;
}

/** Every output handle of `node`: the server's list when known, else the config's,
 * else the kind's default; `error` under the error-branch strategy. */
export function nodeHandles(node: WorkflowNode | Omit<WorkflowNode, 'position'>, kind: NodeKind | undefined,
  shapes: Shapes): string[] {
  const base = shapes.handles[node.id] ?? configHandles(node, kind) ?? kind?.handles ?? ['out'];
  const out = base.filter((h) => h !== 'error');
  if (node.error_strategy === 'error_branch') out.push('error');
  return out;
}

/** The output names of `node`: the server's list, else the kind's default list. */
export function nodeOutputs(node: Pick<WorkflowNode, 'id' | 'error_strategy'>, kind: NodeKind | undefined,
  shapes: Shapes): string[] {
  const base = shapes.outputs[node.id] ?? Object.keys(kind?.outputs ?? {});
  const out = [...base];
  if (node.error_strategy === 'error_branch' && !out.includes('error')) out.push('error');
  return out;
}

/** The config field listing graph tools - array items naming a body node in `node` -
 * or null when the kind has none (only such nodes get tool handles). */
export function toolField(kind: NodeKind | undefined): string | null {
  const root = (kind?.config_schema ?? {}) as JSONSchema;
  for (const [key, prop] of Object.entries(root.properties ?? {})) {
    const p = resolve(prop, root);
    if (p.type === 'array' && resolve(p.items, root).properties?.node) return key;
  }
  return null;
}

export interface NodeProblems {
  errors: number;
  warnings: number;
  /** The messages, errors first, one per line (the badge's tooltip). */
  text: string;
}

/** Errors, warnings and their messages per node id (problems without a node are left out);
 * `words` gives a problem's text (default: the server's message). */
export function problemIndex(problems: readonly Problem[], words: (p: Problem) => string = (p) => p.message):
  Record<string, NodeProblems> {
  const out: Record<string, NodeProblems> = {};
  const ordered = [...problems].sort((a, b) => Number(b.severity === 'error') - Number(a.severity === 'error'));
  for (const p of ordered) {
    if (!p.node_id) continue;
    const entry = out[p.node_id] ?? (out[p.node_id] = { errors: 0, warnings: 0, text: '' });
    if (p.severity === 'error') entry.errors += 1;
    else entry.warnings += 1;
    entry.text += `${entry.text ? '\n' : ''}${words(p)}`;
  }
  return out;
}

/** The value types of the workflow format (`VarType`), as the catalog's schemas define
 * them; empty until the catalog is loaded. */
export function varTypes(kinds: readonly NodeKind[]): string[] {
  for (const k of kinds) {
    const defs = (k.config_schema as JSONSchema).$defs ?? {};
    for (const def of Object.values(defs)) {
      if (def.title === 'VarType' && Array.isArray(def.enum)) return def.enum.map(String);
    }
  }
  return [];
}
