/**
 * Pure bookkeeping of a run as the panel sees it: {@link reduceFrame} folds one SSE
 * frame (a run event, or `meta` / `error` / `done`) into a {@link LiveRun}, and
 * {@link statusesFromDetail} gives the node statuses of a finished (or paused) run from
 * `GET /v1/runs/{id}`, for trace replay. No React, no fetch: unit-tested with vitest.
 *
 * Node statuses are the badge vocabulary of the canvas: `running`, `succeeded`,
 * `failed`, `skipped`, `waiting` (an interrupt waits for a person), `cancelled`.
 */
import type { Interrupt, NodeError } from '../api/types';
import { withProblems } from '../lib/errors';
import type { RunFrame } from './sse';

export type NodeStatus = 'running' | 'succeeded' | 'failed' | 'skipped' | 'waiting' | 'cancelled';
export type RunState = 'starting' | 'running' | 'paused' | 'succeeded' | 'failed' | 'cancelled';

/** A question the run waits for: its id, the node that asks, its kind and payload (the
 * payload's shape is its kind's: options, a form's fields, a tool call to allow). */
export interface PendingInterrupt {
  id: string;
  nodeId: string;
  kind: Interrupt['kind'];
  payload: Interrupt['payload'];
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

const RUN_END: Record<string, RunState> = { succeeded: 'succeeded', failed: 'failed', cancelled: 'cancelled',
  paused: 'paused' };

function errorText(error: NodeError | null | undefined): string {
  if (!error) return '';
  return error.node_id ? `${error.node_id}: ${error.message}` : error.message;
}

function text(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

/** `known` plus the citation objects of `items` not there yet (same id and chunk); an
 * item is read field by field, as the output of a node it is not typed by the document. */
function withCitations(known: Citation[], items: unknown[]): Citation[] {
  const out = [...known];
  for (const item of items) {
    if (!item || typeof item !== 'object') continue;
    const c: Record<string, unknown> = { ...item };
    const id = String(c.citation_id);
    const chunk = text(c.chunk_id);
    if (!out.some((k) => k.citation_id === id && k.chunk_id === chunk)) {
      out.push({ citation_id: id, source_name: String(c.source_name ?? ''), chunk_id: chunk,
        dataset_id: text(c.dataset_id), text: text(c.text) });
    }
  }
  return out;
}

/** The run after `frame`. Frames of another run than the one followed are ignored. */
export function reduceFrame(run: LiveRun, frame: RunFrame): LiveRun {
  if (frame.event === 'meta') {
    return { ...run, runId: frame.data.run_id, chatId: frame.data.chat_id ?? run.chatId, status: 'running' };
  }
  if (frame.event === 'error') {
    const err = frame.data.error;
    return { ...run, status: run.status === 'running' || run.status === 'starting' ? 'failed' : run.status,
      error: withProblems(err.message, err.problems) };
  }
  if (frame.event === 'done') {
    const status = RUN_END[frame.data.status];
    return status ? { ...run, status } : run;
  }
  const d = frame.data;
  const next: LiveRun = { ...run, lastSeq: Math.max(run.lastSeq, frame.id ?? d.seq) };
  const setNode = (nodeId: string, state: NodeState) => { next.nodes = { ...run.nodes, [nodeId]: state }; };
  switch (d.type) {
    case 'run_started':
      next.status = 'running';
      break;
    case 'run_resumed': {
      next.status = 'running';
      const answered = new Set(d.answered);
      next.interrupts = run.interrupts.filter((i) => !answered.has(i.id));
      break;
    }
    case 'node_started':
      setNode(d.node_id, { status: 'running' });
      break;
    case 'node_delta':
      if (d.channel === 'reasoning') next.reasoning = run.reasoning + d.text;
      else next.answer = run.answer + d.text;
      break;
    case 'node_finished': {
      const status = NODE_END[d.status] ?? 'succeeded';
      setNode(d.node_id, { status, detail: d.error ? errorText(d.error) : `${Math.round(d.elapsed_ms)} ms` });
      const cited = d.outputs?.citations;
      if (status === 'succeeded' && Array.isArray(cited)) next.citations = withCitations(run.citations, cited);
      break;
    }
    case 'node_warning':
      next.warnings = [...run.warnings, d.message || d.code];
      break;
    case 'interrupt':
      setNode(d.node_id, { status: 'waiting' });
      next.interrupts = [...run.interrupts.filter((i) => i.id !== d.interrupt_id),
        { id: d.interrupt_id, nodeId: d.node_id, kind: d.kind, payload: d.payload }];
      break;
    case 'run_paused':
      next.status = 'paused';
      break;
    case 'run_finished':
      next.status = 'succeeded';
      if (d.answer.length >= run.answer.length) next.answer = d.answer;
      next.outputs = d.outputs;
      next.interrupts = [];
      break;
    case 'run_failed':
      next.status = 'failed';
      next.error = errorText(d.error) || d.reason;
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
