/**
 * The shapes of `GET /v1/runs/{id}` the run panel reads, written out here (with the
 * fields newer than the checked-in OpenAPI types: `duration_s` and `reused_from` of a
 * node run) so the panel does not depend on when the types were last generated.
 */
export interface NodeRunTrace {
  id: string;
  node_id: string;
  kind: string;
  status: string;
  inputs?: Record<string, unknown>;
  outputs?: Record<string, unknown> | null;
  error?: { type?: string; message: string; node_id?: string | null; reason?: string | null } | null;
  attempts: number;
  usage?: { model?: string | null; tokens_in: number; tokens_out: number; cost?: number } | null;
  data?: Record<string, unknown>;
  loop_id?: string | null;
  iteration?: number | null;
  duration_s?: number | null;
  reused_from?: string | null;
  started_at?: number | null;
  finished_at?: number | null;
}

export interface RunTrace {
  run_id: string;
  workflow_id: string;
  workflow_version?: string | null;
  status: string;
  chat_id?: string | null;
  duration_s?: number | null;
  tokens_in?: number;
  tokens_out?: number;
  cost?: number;
  answer?: string;
  /** `single_node`: one node run alone (`node_id`), else `workflow`. */
  kind?: string;
  node_id?: string | null;
  outputs?: Record<string, unknown> | null;
  node_runs: NodeRunTrace[];
}

/** The validate answer with its declared inputs. */
export interface ValidateAnswer {
  valid: boolean;
  inputs?: { name: string; type?: string; required?: boolean; default?: unknown; description?: string }[];
}
