/** Names for the API's bodies, taken from the types generated from the OpenAPI document
 * (`npm run gen:api` writes schema.d.ts from openapi.json). */
import type { components } from './schema';

type S = components['schemas'];
export type NodeKind = S['NodeKindOut'];
export type NodeKindList = S['NodeKindList'];
export type WorkflowOut = S['WorkflowOut'];
export type WorkflowDetail = S['WorkflowDetail'];
export type WorkflowList = S['WorkflowList'];
export type WorkflowProblems = S['WorkflowProblems'];
export type WorkflowVersion = S['WorkflowVersionOut'];
export type WorkflowVersionList = S['WorkflowVersionList'];
export type WorkflowImported = S['WorkflowImported'];
export type ErrorBody = S['ErrorBody'];
export type RunDetail = S['RunDetail'];
export type RunOut = S['RunOut'];
export type RunList = S['RunList'];
export type RunAccepted = S['RunAccepted'];
export type WorkflowRunCreate = S['WorkflowRunCreate'];
export type NodeScope = S['NodeScope'];
export type ChatVariablesBody = S['ChatVariables'];
export type ScopeEntryOut = S['ScopeEntryOut'];
export type SecretsOut = S['SecretsOut'];
export type WorkflowInput = S['WorkflowInputOut'];

/** A node run of `GET /v1/runs/{id}`, and what its kind records (`data`). */
export type NodeRunOut = S['NodeRunOut'];
export type NodeData = S['NodeData'];
export type AgentRound = S['AgentRound'];
export type BodyRun = S['BodyRun'];
export type SentRecord = S['SentRecord'];

/** The run event stream: every run event (told apart by `type`), and the first and last frames. */
export type RunEvent = S['RunEvent'];
export type RunStreamMeta = S['RunStreamMeta'];
export type RunStreamDone = S['RunStreamDone'];
export type NodeError = S['NodeError'];
/** A question a paused run waits for; `payload` has the shape of its `kind`. */
export type Interrupt = S['Interrupt'];
export type InterruptPayload = Interrupt['payload'];

/** One compile problem, as `flowloom validate --json` prints it. */
export interface Problem {
  code: string;
  severity: 'error' | 'warning';
  node_id: string | null;
  edge_id: string | null;
  path: string | null;
  message: string;
}
