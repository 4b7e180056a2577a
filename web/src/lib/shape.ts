/**
 * The output handles and output names of configured nodes.
 *
 * The server is the authority: the catalog gives each kind's handles and outputs for
 * its default config, and for a configured node (an if/else's cases, a classifier's
 * categories, a code node's declared outputs) the compiler knows them. The API has no
 * route that returns them per node yet, so the canvas asks the validator: it sends a
 * copy of the document in which every node has an edge from a handle that does not
 * exist and one template reads an output that does not exist; the compiler answers
 * `unknown_handle` / `unknown_output` listing the real ones ("(handles: a, b, else)",
 * "(outputs: answer, usage)"). {@link parseProbe} reads them back.
 *
 * Until the probe answers (or for a node whose config does not validate yet) the handles
 * come from the config and its schema: array items carrying an `id` name handles (cases,
 * categories, options), plus `else` when the kind's schema says the node takes it.
 */
import type { NodeKind, Problem } from '../api/types';
import { initialObject, resolve, type JSONSchema } from './schema';
import type { WorkflowDoc, WorkflowNode } from './workflow';

export const PROBE_NODE = '__flowloom_shape_probe__';
export const PROBE_HANDLE = '__flowloom_no_such_handle__';
export const PROBE_OUTPUT = '__flowloom_no_such_output__';
export const MODEL_PROBE_NODE = `${PROBE_NODE}model`;
export const PROBE_MODEL = '__flowloom_no_such_model__';
export const PROBE_SYS = '__flowloom_no_such_sys__';

export interface Shapes {
  handles: Record<string, string[]>;
  outputs: Record<string, string[]>;
  /** The model registry's names (the compiler lists them when a model is unknown). */
  models?: string[];
  /** The system variables (`sys.NAME`) the compiler declares. */
  system?: string[];
}

export const emptyShapes: Shapes = { handles: {}, outputs: {} };

/** A node that names an unknown model, so the compiler lists the registry's models: of
 * the catalog kind with a `model` field and the fewest required fields, its config built
 * from its schema. Null when no kind calls a model. */
export function modelProbeNode(kinds: readonly NodeKind[]): WorkflowNode | null {
  let best: { kind: NodeKind; required: number } | null = null;
  for (const k of kinds) {
    const root = k.config_schema as JSONSchema;
    if (!root.properties?.model || !/model registry/i.test(resolve(root.properties.model, root).description ?? '')) continue;
    const required = (root.required ?? []).length;
    if (!best || required < best.required) best = { kind: k, required };
  }
  if (!best) return null;
  const root = best.kind.config_schema as JSONSchema;
  return { id: MODEL_PROBE_NODE, type: best.kind.kind, config: { ...initialObject(root, root), model: PROBE_MODEL } };
}

/** A copy of `doc` with the probe edges, the probe template node and (given) the model
 * probe node added. */
export function probeDocument(doc: WorkflowDoc, modelProbe: WorkflowNode | null = null): WorkflowDoc {
  const ids = doc.nodes.map((n) => n.id);
  const reads = [...ids.map((id) => `{{ nodes[${JSON.stringify(id)}].${PROBE_OUTPUT} }}`), `{{ sys.${PROBE_SYS} }}`].join(' ');
  return {
    ...doc,
    nodes: [...doc.nodes, { id: PROBE_NODE, type: 'template', config: { template: reads } },
      ...(modelProbe ? [modelProbe] : [])],
    edges: [...doc.edges, ...ids.map((id, i) => ({ id: `${PROBE_NODE}${i}`, source: id, sourceHandle: PROBE_HANDLE,
      target: PROBE_NODE }))],
  };
}

function listIn(message: string, label: string): string[] | null {
  const m = message.match(new RegExp(`\\(${label}: ([^)]*)\\)\\s*$`));
  if (!m) return null;
  return m[1].split(',').map((s) => s.trim()).filter(Boolean);
}

function quotedNode(message: string): string | null {
  const m = message.match(/^node (['"])(.*?)\1 has no output/);
  return m ? m[2] : null;
}

/** The handles and outputs the compiler listed in its answer to {@link probeDocument}. */
export function parseProbe(problems: readonly Problem[]): Shapes {
  const shapes: Shapes = { handles: {}, outputs: {} };
  for (const p of problems) {
    if (p.code === 'unknown_handle' && p.node_id && p.edge_id?.startsWith(PROBE_NODE)) {
      const list = listIn(p.message, 'handles');
      if (list) shapes.handles[p.node_id] = list;
    } else if (p.code === 'unknown_sys' && p.node_id === PROBE_NODE && p.message.includes(PROBE_SYS)) {
      const list = listIn(p.message, 'declared');
      if (list) shapes.system = list;
    } else if (p.code === 'unknown_model' && p.node_id === MODEL_PROBE_NODE) {
      const list = listIn(p.message, 'known');
      if (list) shapes.models = list;
    } else if (p.code === 'unknown_output' && p.node_id === PROBE_NODE && p.message.includes(PROBE_OUTPUT)) {
      const node = quotedNode(p.message);
      const list = listIn(p.message, 'outputs');
      if (node !== null && list) shapes.outputs[node] = list;
    }
  }
  return shapes;
}

/** The problems of the real document: the probe's own findings left out. */
export function withoutProbe(problems: readonly Problem[]): Problem[] {
  return problems.filter((p) => !(p.node_id ?? '').startsWith(PROBE_NODE) && !(p.edge_id ?? '').startsWith(PROBE_NODE)
    && ![PROBE_OUTPUT, PROBE_HANDLE, PROBE_MODEL, PROBE_SYS].some((marker) => p.message.includes(marker)));
}

/** Handles named by the config itself (see the module docstring). */
export function configHandles(node: Pick<WorkflowNode, 'config'>, kind: NodeKind | undefined): string[] | null {
  const root = (kind?.config_schema ?? {}) as JSONSchema;
  const config = node.config ?? {};
  const found: string[] = [];
  let named = false;
  for (const [key, prop] of Object.entries(root.properties ?? {})) {
    const p = resolve(prop, root);
    const item = p.type === 'array' ? resolve(p.items, root) : null;
    if (!item?.properties?.id || !/handle/i.test(`${item.description ?? ''} ${p.description ?? ''}`)) continue;
    named = true;
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

/** Every output handle of `node`: the compiler's list when known, else the config's,
 * else the kind's default; `error` under the error-branch strategy. */
export function nodeHandles(node: WorkflowNode | Omit<WorkflowNode, 'position'>, kind: NodeKind | undefined,
  shapes: Shapes): string[] {
  const base = shapes.handles[node.id] ?? configHandles(node, kind) ?? kind?.handles ?? ['out'];
  const out = base.filter((h) => h !== 'error');
  if (node.error_strategy === 'error_branch') out.push('error');
  return out;
}

/** The output names of `node`: the compiler's list, else the kind's default list. */
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

/** Errors, warnings and their messages per node id (problems without a node are left out). */
export function problemIndex(problems: readonly Problem[]): Record<string, NodeProblems> {
  const out: Record<string, NodeProblems> = {};
  const ordered = [...problems].sort((a, b) => Number(b.severity === 'error') - Number(a.severity === 'error'));
  for (const p of ordered) {
    if (!p.node_id) continue;
    const entry = out[p.node_id] ?? (out[p.node_id] = { errors: 0, warnings: 0, text: '' });
    if (p.severity === 'error') entry.errors += 1;
    else entry.warnings += 1;
    entry.text += `${entry.text ? '\n' : ''}${p.message}`;
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
