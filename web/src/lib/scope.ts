/**
 * What a node may read: the outputs of the nodes upstream of it (through edges; for a
 * node inside a container body, also the container - its item, index and loop
 * variables - and what is upstream of the container), the global inputs, the run
 * variables, the environment variables and the system variables. The variable picker offers exactly these; the
 * compiler remains the judge (a read of a node that is not upstream is its error).
 * The system variables are the compiler's list (lib/shape.ts reads it from the validator).
 */
import { refPath } from './refs';
import type { WorkflowDoc } from './workflow';

export interface ScopeEntry {
  /** The reference path to store: `{"ref": path}` or `{{ path }}`. */
  path: string;
  group: 'inputs' | 'vars' | 'env' | 'sys' | 'node';
  nodeId?: string;
  output?: string;
  type?: string;
}

type Graph = Pick<WorkflowDoc, 'nodes' | 'edges'>;

/** Ids of the nodes with a path of edges to `nodeId` (not itself, unless on a cycle). */
export function ancestors(graph: Graph, nodeId: string): Set<string> {
  const incoming = new Map<string, string[]>();
  for (const e of graph.edges) {
    const list = incoming.get(e.target);
    if (list) list.push(e.source);
    else incoming.set(e.target, [e.source]);
  }
  const seen = new Set<string>();
  const stack = [...(incoming.get(nodeId) ?? [])];
  while (stack.length) {
    const id = stack.pop()!;
    if (seen.has(id)) continue;
    seen.add(id);
    stack.push(...(incoming.get(id) ?? []));
  }
  return seen;
}

/** The containers holding `nodeId`, innermost first. */
export function containersOf(graph: Graph, nodeId: string): string[] {
  const parentOf = new Map(graph.nodes.map((n) => [n.id, n.parent ?? null]));
  const out: string[] = [];
  for (let p = parentOf.get(nodeId); p && !out.includes(p); p = parentOf.get(p)) out.push(p);
  return out;
}

/** Node ids `nodeId` may read, nearest first: its upstream nodes, then per enclosing
 * container the container itself and what is upstream of it. A container also reads
 * its own body (its collect/update fields are resolved in the body's scope). */
export function readableNodes(graph: Graph, nodeId: string): string[] {
  const out: string[] = [];
  const add = (ids: Iterable<string>) => {
    for (const id of ids) if (id !== nodeId && !out.includes(id)) out.push(id);
  };
  add(ancestors(graph, nodeId));
  for (const c of containersOf(graph, nodeId)) {
    add([c]);
    add(ancestors(graph, c));
  }
  add(graph.nodes.filter((n) => n.parent === nodeId).map((n) => n.id));
  const known = new Set(graph.nodes.map((n) => n.id));
  return out.filter((id) => known.has(id));
}

/** Everything the variable picker offers to `nodeId`: inputs, run variables, system
 * variables and the outputs of the readable nodes (`outputsOf` gives a node's outputs). */
export function availableVariables(doc: WorkflowDoc, nodeId: string, system: readonly string[],
  outputsOf: (id: string) => string[], typeOf: (id: string, output: string) => string | undefined = () => undefined):
  ScopeEntry[] {
  const out: ScopeEntry[] = [];
  for (const v of doc.inputs ?? []) out.push({ path: `inputs.${v.name}`, group: 'inputs', type: v.type });
  for (const v of doc.variables ?? []) out.push({ path: `vars.${v.name}`, group: 'vars', type: v.type });
  // environment variables: a secret reads as a string
  for (const v of doc.environment ?? []) out.push({ path: `env.${v.name}`, group: 'env', type: v.type === 'number' ? 'number' : 'string' });
  for (const name of system) out.push({ path: `sys.${name}`, group: 'sys' });
  for (const id of readableNodes(doc, nodeId)) {
    for (const output of outputsOf(id)) {
      out.push({ path: refPath(id, output), group: 'node', nodeId: id, output, type: typeOf(id, output) });
    }
  }
  return out;
}
