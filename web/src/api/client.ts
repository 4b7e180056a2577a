/**
 * The HTTP client of the canvas: every call sends the API key kept in localStorage
 * (`Authorization: Bearer <key>`), and every failure is an {@link ApiError} carrying the
 * server's own message (`{"error": {"type", "message", "problems"?}}`), so the UI shows
 * what the server said rather than a status code.
 */
import type {
  NodeKindList, NodeScope, Problem, RunAccepted, RunDetail, RunList, WorkflowDetail, WorkflowImported, WorkflowList,
  WorkflowProblems, WorkflowRunCreate, WorkflowVersion, WorkflowVersionList,
  SecretsOut,
} from './types';
import type { WorkflowDoc } from '../lib/workflow';
import { t } from '../i18n';
import { withProblems } from '../lib/errors';

const KEY_STORAGE = 'flowloom.apiKey';

/** The stored API key, or null when none was given yet. */
export function getApiKey(): string | null {
  try {
    return localStorage.getItem(KEY_STORAGE);
  } catch {
    return null;
  }
}

/** Stores (or with null forgets) the API key. */
export function setApiKey(key: string | null): void {
  if (key) localStorage.setItem(KEY_STORAGE, key.trim());
  else localStorage.removeItem(KEY_STORAGE);
}

/**
 * Reads `#key=<api key>` from the URL fragment (the login link `flowloom serve` prints),
 * stores it and removes it from the address bar so it is not left in the history.
 * Returns true when a key was taken.
 */
export function takeKeyFromLocation(loc: Location = window.location): boolean {
  const params = new URLSearchParams(loc.hash.replace(/^#/, ''));
  const key = params.get('key');
  if (!key) return false;
  setApiKey(key);
  params.delete('key');
  const rest = params.toString();
  history.replaceState(null, '', loc.pathname + loc.search + (rest ? `#${rest}` : ''));
  return true;
}

/** A failed API call: HTTP status, the server's error type and message, and its
 * problems or current draft version when it sent them. `message` is the server's
 * message followed by every problem's text (strings or problem objects alike, see
 * lib/errors.ts), so wherever an error is shown the reasons come with it; `summary` is
 * the server's message alone (for views that list `problems` themselves). */
export class ApiError extends Error {
  readonly summary: string;

  constructor(
    readonly status: number,
    readonly type: string,
    message: string,
    readonly problems: Problem[] | unknown[] | null = null,
    readonly currentVersion: number | null = null,
  ) {
    super(withProblems(message, problems));
    this.summary = message;
    this.name = 'ApiError';
  }
}

/** Builds an ApiError from a response body (JSON error shape, else its text). */
export async function errorFrom(res: Response): Promise<ApiError> {
  const text = await res.text();
  try {
    const body = JSON.parse(text) as { error?: { type?: string; message?: string; problems?: unknown[] } | string;
      current_version?: number; detail?: unknown };
    const err = typeof body.error === 'object' && body.error ? body.error : null;
    if (err) {
      return new ApiError(res.status, err.type ?? 'error', err.message ?? res.statusText, err.problems ?? null,
        body.current_version ?? null);
    }
  } catch {
    /* not JSON: fall through to the text */
  }
  return new ApiError(res.status, 'http_error', text.trim() || `${res.status} ${res.statusText}`);
}

type Query = Record<string, string | number | boolean | undefined | null>;

/** Low-level request: JSON in and out, the key sent, errors thrown as ApiError. */
export async function request<T>(method: string, path: string, opts: { body?: unknown; query?: Query;
  form?: FormData; signal?: AbortSignal } = {}): Promise<T> {
  const headers: Record<string, string> = { Accept: 'application/json' };
  const key = getApiKey();
  if (key) headers.Authorization = `Bearer ${key}`;
  let body: BodyInit | undefined;
  if (opts.form) body = opts.form;
  else if (opts.body !== undefined) {
    headers['Content-Type'] = 'application/json';
    body = JSON.stringify(opts.body);
  }
  const qs = new URLSearchParams();
  for (const [k, v] of Object.entries(opts.query ?? {})) if (v !== undefined && v !== null) qs.set(k, String(v));
  const url = path + (qs.size ? `?${qs}` : '');
  let res: Response;
  try {
    res = await fetch(url, { method, headers, body, signal: opts.signal });
  } catch (e) {
    if ((e as Error).name === 'AbortError') throw e;
    throw new ApiError(0, 'network_error', t('common.unreachable', { message: (e as Error).message }));
  }
  if (!res.ok) throw await errorFrom(res);
  if (res.status === 204) return undefined as T;
  return (await res.json()) as T;
}

const wf = (id: string) => `/v1/workflows/${encodeURIComponent(id)}`;

/** The API routes the canvas uses (and the run panel builds on). */
export const api = {
  nodeKinds: () => request<NodeKindList>('GET', '/v1/node-kinds'),
  listWorkflows: () => request<WorkflowList>('GET', '/v1/workflows'),
  getWorkflow: (id: string) => request<WorkflowDetail>('GET', wf(id)),
  createWorkflow: (doc: WorkflowDoc) => request<WorkflowDetail>('POST', '/v1/workflows', { body: doc }),
  /** Replaces the draft; 409 (ApiError.currentVersion set) when another tab saved since. */
  saveDraft: (id: string, doc: WorkflowDoc, draftVersion: number) =>
    request<WorkflowDetail>('PUT', wf(id), { body: { workflow: doc, draft_version: draftVersion } }),
  deleteWorkflow: (id: string) => request<void>('DELETE', wf(id)),
  validate: (doc: WorkflowDoc, signal?: AbortSignal) =>
    request<WorkflowProblems>('POST', '/v1/workflows/validate', { body: doc, signal }),
  /** What `nodeId` may reference in config field `field` (the compiler's own rule). */
  scope: (doc: WorkflowDoc, nodeId: string, field: string | null, signal?: AbortSignal) =>
    request<NodeScope>('POST', '/v1/workflows/scope', { body: { workflow: doc, node_id: nodeId, field }, signal }),
  publish: (id: string, note: string) => request<WorkflowVersion>('POST', `${wf(id)}/publish`, { body: { note } }),
  versions: (id: string) => request<WorkflowVersionList>('GET', `${wf(id)}/versions`),
  rollback: (id: string, version: number, note?: string) =>
    request<WorkflowVersion>('POST', `${wf(id)}/rollback`, { body: { version, note } }),
  exportWorkflow: (id: string, version?: number) =>
    request<WorkflowDoc>('GET', `${wf(id)}/export`, { query: { version } }),
  /** Converts a FastGPT / Dify / Flowloom file; `save` stores it as a new draft. */
  importFile: (file: File, opts: { save?: boolean; allowPartial?: boolean; workflowId?: string;
    modelMap?: Record<string, string>; datasetMap?: Record<string, string> } = {}) => {
    const form = new FormData();
    form.set('file', file);
    if (opts.modelMap && Object.keys(opts.modelMap).length) form.set('model_map', JSON.stringify(opts.modelMap));
    if (opts.datasetMap && Object.keys(opts.datasetMap).length) form.set('dataset_map', JSON.stringify(opts.datasetMap));
    if (opts.allowPartial) form.set('allow_partial', 'true');
    if (opts.workflowId) form.set('workflow_id', opts.workflowId);
    return request<WorkflowImported>('POST', '/v1/workflows/import', { form, query: { save: opts.save || undefined } });
  },
  runWorkflow: (id: string, body: WorkflowRunCreate, draft = false) =>
    request<RunDetail | RunAccepted>('POST', `${wf(id)}/runs`, { body, query: { draft: draft || undefined } }),
  listRuns: (query: Query = {}) => request<RunList>('GET', '/v1/runs', { query }),
  getRun: (id: string) => request<RunDetail>('GET', `/v1/runs/${encodeURIComponent(id)}`),
  // environment variables and secrets: values go to the server, never come back
  secrets: (id: string) => request<SecretsOut>('GET', `${wf(id)}/secrets`),
  setSecrets: (id: string, values: Record<string, string | null>) =>
    request<SecretsOut>('PUT', `${wf(id)}/secrets`, { body: { values } }),
};
