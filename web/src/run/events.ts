/**
 * Pure bookkeeping of a run as the panel sees it: {@link reduceFrame} folds one SSE
 * frame (a run event, or `meta` / `error` / `done`) into a {@link LiveRun}, and
 * {@link statusesFromDetail} gives the node statuses of a finished (or paused) run from
 * `GET /v1/runs/{id}`, for trace replay. No React, no fetch: unit-tested with vitest.
 *
 * Node statuses are the badge vocabulary of the canvas: `running`, `succeeded`,
 * `failed`, `skipped`, `waiting` (an interrupt waits for a person), `cancelled`.
 */
import { withProblems } from '../lib/errors';
import type { SseFrame } from './sse';

export type NodeStatus = 'running' | 'succeeded' | 'failed' | 'skipped' | 'waiting' | 'cancelled';
export type RunState = 'starting' | 'running' | 'paused' | 'succeeded' | 'failed' | 'cancelled';

/** A question the run waits for: its id, the node that asks, its kind and payload. */
export interface PendingInterrupt {
  id: string;
  nodeId: string;
  kind: string;
  payload: Record<string, unknown>;
}

/** A source the answer cites: a chat node's `citations` output item (`QuotePiece`). */
export interface Citation {
  citation_id: string;
  source_name: string;
  chunk_id?: string;
  dataset_id?: string;
  text?: string;
  score?: number;
  heading_path?: string[];
}

export interface NodeState {
  status: NodeStatus;
  /** Error message or elapsed time, shown on hover. */
  detail?: string;
}

export interface LiveRun {
  runId: string | null;
  chatId: string | null;
  status: RunState;
  answer: string;
  reasoning: string;
  nodes: Record<string, NodeState>;
  interrupts: PendingInterrupt[];
  error: string | null;
  /** The `seq` of the last run event seen (to follow the run again after it). */
  lastSeq: number;
  warnings: string[];
  /** The sources the answer cites (from the chat nodes' `node_finished` outputs), each once. */
  citations: Citation[];
  /** The run's outputs (its End nodes' values) from `run_finished`; null until then. */
  outputs: Record<string, unknown> | null;
}

export function emptyRun(): LiveRun {
  return { runId: null, chatId: null, status: 'starting', answer: '', reasoning: '', nodes: {}, interrupts: [],
    error: null, lastSeq: 0, warnings: [], citations: [], outputs: null };
}

const NODE_END: Record<string, NodeStatus> = {
  succeeded: 'succeeded', failed: 'failed', skipped: 'skipped', cancelled: 'cancelled', waiting: 'waiting',
  running: 'running',
};

function errorText(error: unknown): string {
  if (error && typeof error === 'object') {
    const e = error as { message?: unknown; node_id?: unknown };
    const msg = typeof e.message === 'string' ? e.message : JSON.stringify(error);
    return e.node_id ? `${String(e.node_id)}: ${msg}` : msg;
  }
  return String(error ?? '');
}

/** `known` plus the citation objects of `items` not there yet (same id and chunk). */
function withCitations(known: Citation[], items: unknown[]): Citation[] {
  const out = [...known];
  for (const item of items) {
    if (!item || typeof item !== 'object') continue;
    const c = item as Citation;
    if (!out.some((k) => k.citation_id === c.citation_id && k.chunk_id === c.chunk_id)) {
      out.push({ citation_id: String(c.citation_id), source_name: String(c.source_name ?? ''), chunk_id: c.chunk_id,
        dataset_id: c.dataset_id, text: typeof c.text === 'string' ? c.text : undefined });
    }
  }
  return out;
}

/** The run after `frame`. Frames of another run than the one followed are ignored. */
export function reduceFrame(run: LiveRun, frame: SseFrame): LiveRun {
  const d = frame.data;
  if (frame.event === 'meta') {
    return { ...run, runId: String(d.run_id ?? ''), chatId: (d.chat_id as string | null) ?? run.chatId, status: 'running' };
  }
  if (frame.event === 'error') {
    const err = (d.error ?? d) as { message?: string; problems?: unknown };
    return { ...run, status: run.status === 'running' || run.status === 'starting' ? 'failed' : run.status,
      error: err.message != null ? withProblems(err.message, err.problems) : JSON.stringify(d) };
  }
  if (frame.event === 'done') {
    const status = String(d.status ?? '');
    return status in { succeeded: 1, failed: 1, cancelled: 1, paused: 1 } ? { ...run, status: status as RunState } : run;
  }
  const next: LiveRun = { ...run, lastSeq: Math.max(run.lastSeq, frame.id ?? Number(d.seq ?? 0)) };
  const nodeId = d.node_id as string | undefined;
  const setNode = (state: NodeState) => { if (nodeId) next.nodes = { ...run.nodes, [nodeId]: state }; };
  switch (d.type ?? frame.event) {
    case 'run_started':
    case 'run_resumed':
      next.status = 'running';
      if (d.type === 'run_resumed') {
        const answered = new Set((d.answered as string[] | undefined) ?? []);
        next.interrupts = run.interrupts.filter((i) => !answered.has(i.id));
      }
      break;
    case 'node_started':
      setNode({ status: 'running' });
      break;
    case 'node_delta':
      if (d.channel === 'reasoning') next.reasoning = run.reasoning + String(d.text ?? '');
      else next.answer = run.answer + String(d.text ?? '');
      break;
    case 'node_finished': {
      const status = NODE_END[String(d.status)] ?? 'succeeded';
      const ms = Number(d.elapsed_ms ?? 0);
      setNode({ status, detail: d.error ? errorText(d.error) : `${Math.round(ms)} ms` });
      const cited = (d.outputs as { citations?: unknown } | null | undefined)?.citations;
      if (status === 'succeeded' && Array.isArray(cited)) next.citations = withCitations(run.citations, cited);
      break;
    }
    case 'node_warning':
      next.warnings = [...run.warnings, String(d.message ?? d.code ?? '')];
      break;
    case 'interrupt':
      setNode({ status: 'waiting' });
      next.interrupts = [...run.interrupts.filter((i) => i.id !== d.interrupt_id), {
        id: String(d.interrupt_id), nodeId: String(d.node_id), kind: String(d.kind),
        payload: (d.payload as Record<string, unknown>) ?? {} }];
      break;
    case 'run_paused':
      next.status = 'paused';
      break;
    case 'run_finished':
      next.status = 'succeeded';
      if (typeof d.answer === 'string' && d.answer.length >= run.answer.length) next.answer = d.answer;
      if (d.outputs && typeof d.outputs === 'object') next.outputs = d.outputs as Record<string, unknown>;
      next.interrupts = [];
      break;
    case 'run_failed':
      next.status = 'failed';
      next.error = errorText(d.error) || String(d.reason ?? '');
      next.interrupts = [];
      break;
    case 'run_cancelled':
      next.status = 'cancelled';
      next.interrupts = [];
      next.nodes = Object.fromEntries(Object.entries(next.nodes).map(([id, s]) =>
        [id, s.status === 'running' || s.status === 'waiting' ? { status: 'cancelled' as const } : s]));
      break;
    default:
      break;
  }
  return next;
}

/** The subset of a node run of `GET /v1/runs/{id}` the statuses need. */
export interface NodeRunLike {
  node_id: string;
  status: string;
  loop_id?: string | null;
  error?: { message?: string } | null;
  duration_s?: number | null;
}

/** Node statuses of a stored run: per node id, its top-level node run (the last one
 * when a back-edge loop ran it several times); nodes inside loop bodies by their last round. */
export function statusesFromDetail(nodeRuns: NodeRunLike[]): Record<string, NodeState> {
  const out: Record<string, NodeState> = {};
  const topLevel = new Set<string>();
  for (const nr of nodeRuns) {
    if (nr.loop_id && topLevel.has(nr.node_id)) continue;
    const status = NODE_END[nr.status] ?? (nr.status === 'pending' ? null : 'succeeded');
    if (!status) continue;
    if (!nr.loop_id) topLevel.add(nr.node_id);
    const detail = nr.error?.message ?? (nr.duration_s != null ? `${Math.round(nr.duration_s * 1000)} ms` : undefined);
    out[nr.node_id] = { status, detail };
  }
  return out;
}
