/**
 * The workflow document as the engine reads it (README "Workflow format"): the shapes
 * the canvas edits. Node configs stay plain JSON: their fields come from each kind's
 * config JSON Schema in the catalog (GET /v1/node-kinds), never from a list here.
 */

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

/** A structured reference: `{"ref": "node.output.path"}`, `inputs.X`, `sys.X`, `vars.X`, `env.X`. */
export interface Ref {
  ref: string;
}

export interface Position {
  x: number;
  y: number;
}

export interface WorkflowNode {
  id: string;
  type: string;
  name?: string;
  description?: string;
  position?: Position;
  config?: JsonObject;
  parent?: string | null;
  timeout?: number | null;
  max_retries?: number;
  retry_interval?: number;
  error_strategy?: 'fail' | 'error_branch' | 'default_output';
  default_output?: JsonObject | null;
  default_handle?: string | null;
  max_iterations?: number | null;
}

export interface WorkflowEdge {
  id: string;
  source: string;
  sourceHandle?: string;
  target: string;
  targetHandle?: string;
}

export interface VarDecl {
  name: string;
  type?: string;
  required?: boolean;
  default?: Json;
  description?: string;
}

/** An environment variable (`env.NAME`); a secret's value is never in the document:
 * it is set through PUT /v1/workflows/{id}/secrets and read by runs on the server. */
export interface EnvDecl {
  name: string;
  type?: 'string' | 'number' | 'secret';
  value?: string | number | null;
  description?: string;
}

/** A sticky note of the canvas (the engine ignores it). */
export interface NoteDecl {
  id: string;
  text?: string;
  position?: Position;
  width?: number;
  height?: number;
  color?: string;
}

export interface WorkflowDoc {
  id: string;
  name?: string;
  version?: number | string;
  description?: string;
  inputs?: VarDecl[];
  variables?: VarDecl[];
  /** Kept per chat across its turns (`conversation.NAME`). */
  conversation_variables?: VarDecl[];
  environment?: EnvDecl[];
  nodes: WorkflowNode[];
  edges: WorkflowEdge[];
  limits?: JsonObject;
  notes?: NoteDecl[];
}

/** True for `{"ref": "..."}` (exactly one key). */
export function isRef(value: unknown): value is Ref {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
    && Object.keys(value).length === 1 && typeof (value as Ref).ref === 'string';
}

/** An empty document with one start node, for a new workflow. */
export function newWorkflow(id: string, name = ''): WorkflowDoc {
  return { id, name, version: 1, inputs: [], variables: [],
    nodes: [{ id: 'start', type: 'start', position: { x: 0, y: 0 } }], edges: [] };
}
