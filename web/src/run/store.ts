/**
 * The run panel's state and the API calls behind it: a run of the draft streamed over
 * SSE (`POST /v1/workflows/{id}/runs?draft=true`, `response_mode: "streaming"`), stop,
 * answers to interrupts (`POST /v1/runs/{id}/resume`, then the run's events followed
 * again after the last seen `seq`), run history and trace replay (`GET /v1/runs`,
 * `GET /v1/runs/{id}`), re-run from a node (`POST /v1/runs/{id}/rerun`), and the chat
 * preview (turns with a `chat_id` kept across them; messages from
 * `GET /v1/chats/{id}/messages`).
 *
 * Every node status it learns is mirrored into `useRunStatus` (the canvas badges).
 * Only one stream is followed at a time: starting another aborts the previous one
 * (the server run goes on; only Stop stops it).
 */
import { create } from 'zustand';
import { api, request } from '../api/client';
import type { RunDetail, RunOut } from '../api/types';
import { t } from '../i18n';
import { useRunStatus, type NodeRunBadge } from '../store/runStatus';
import { emptyRun, reduceFrame, statusesFromDetail, type LiveRun, type NodeState } from './events';
import { streamRunFrames, type RunFrame } from './sse';

export interface ChatPart { type: string; text?: string; data?: Record<string, unknown> }
export interface ChatMessage {
  id: string;
  role: 'user' | 'assistant';
  run_id?: string | null;
  status: string;
  text: string;
  parts: ChatPart[];
}

export interface RunPanelState {
  workflowId: string | null;
  live: LiveRun;
  busy: boolean;
  /** The run whose trace is shown (live run once it ended, or a past one). */
  trace: RunDetail | null;
  /** A past run selected in the history (replay), or null for the live one. */
  replayId: string | null;
  history: RunOut[];
  error: string | null;
  chatId: string | null;
  messages: ChatMessage[];
  /** True while the live run belongs to the chat preview. */
  chatTurn: boolean;
  /** Error messages of failed runs by run id (a failed chat turn shows its run's). */
  runErrors: Record<string, string>;

  reset: (workflowId: string) => void;
  start: (inputs: Record<string, unknown>, message?: string) => Promise<void>;
  stop: () => Promise<void>;
  /** Answers a pending question; in a chat, `message` (the answer as text) is stored as
   * the user's next turn, so the conversation shows what was answered. */
  answer: (interruptId: string, answer: unknown, runId?: string | null, message?: string) => Promise<void>;
  loadHistory: () => Promise<void>;
  replay: (runId: string | null) => Promise<void>;
  rerun: (runId: string, nodeId: string) => Promise<void>;
  /** Sends a chat turn; false when the server refused to start it (the error is shown,
   * the message is taken back so it can be sent again). */
  sendChat: (message: string, inputs: Record<string, unknown>) => Promise<boolean>;
  /** Reads the error of failed run `runId` (GET /v1/runs/{id}) into `runErrors`. */
  loadRunError: (runId: string) => Promise<void>;
  newChat: () => void;
  loadMessages: () => Promise<void>;
}

let abort: AbortController | null = null;

function label(status: string): string {
  const key = `run.node.${status}` as Parameters<typeof t>[0];
  const text = t(key);
  return text === key ? status : text;
}

/** Writes node statuses into the canvas badges (translated labels). */
export function showStatuses(nodes: Record<string, NodeState>): void {
  const byNode: Record<string, NodeRunBadge> = {};
  for (const [id, s] of Object.entries(nodes)) byNode[id] = { status: s.status, detail: s.detail, label: label(s.status) };
  useRunStatus.getState().setAll(byNode);
}

function newChatId(): string {
  const bytes = new Uint8Array(8);
  crypto.getRandomValues(bytes);
  return `web-${[...bytes].map((b) => b.toString(16).padStart(2, '0')).join('')}`;
}

/** An error as the panel shows it (an ApiError's message already lists its problems). */
function message(e: unknown): string {
  return (e as Error).message;
}

/** The text of a run's stored `error` (`{type, message, node_id, ...}`), '' when none. */
export function runErrorText(error: unknown): string {
  if (!error) return '';
  if (typeof error === 'string') return error;
  const e = error as { message?: unknown };
  return typeof e.message === 'string' ? e.message : JSON.stringify(error);
}

const get = () => useRunPanel.getState();
const set = (patch: Partial<RunPanelState> | ((s: RunPanelState) => Partial<RunPanelState>)) => useRunPanel.setState(patch);

/** Aborts the stream followed so far and returns the controller of the next one. */
function begin(): AbortController {
  abort?.abort();
  const controller = new AbortController();
  abort = controller;
  return controller;
}

/** Follows `frames` into `live` (and the badges) until the stream ends. */
async function follow(frames: AsyncGenerator<RunFrame>, controller: AbortController): Promise<void> {
  try {
    for await (const frame of frames) {
      if (controller.signal.aborted) return;
      const live = reduceFrame(get().live, frame);
      set({ live });
      showStatuses(live.nodes);
    }
  } catch (e) {
    if ((e as Error).name === 'AbortError' || controller.signal.aborted) return;
    set((s) => ({ live: { ...s.live, status: s.live.runId ? s.live.status : 'failed' }, error: message(e) }));
  } finally {
    if (abort === controller) {
      abort = null;
      set({ busy: false });
      await afterStream();
    }
  }
}

/** Once a stream ended: the stored trace, the history, the chat's messages. */
async function afterStream(): Promise<void> {
  const { live, chatTurn } = get();
  if (live.runId && live.status === 'failed' && live.error) set((s) => ({ runErrors: { ...s.runErrors, [live.runId!]: live.error! } }));
  if (live.runId && live.status !== 'running') {
    try {
      const detail = await api.getRun(live.runId);
      if (get().live.runId === live.runId && !get().replayId) set({ trace: detail });
    } catch { /* the trace stays empty; the error shows on the next action */ }
  }
  void get().loadHistory();
  // no run id: the start request itself was refused (its error is shown), so there is
  // no turn stored to read back - a read would only answer 404 for a new chat
  if (chatTurn && live.runId) await settledMessages();
}

/** The chat's messages once the turn's assistant message is closed: the server closes
 * it right after the run's last event, so a read at the end of the stream may still
 * see it `streaming`; it is read again a few times. */
async function settledMessages(): Promise<void> {
  for (let i = 0; i < 20; i += 1) {
    await get().loadMessages();
    const last = get().messages[get().messages.length - 1];
    if (!last || last.role !== 'assistant' || last.status !== 'streaming' || get().busy) return;
    await new Promise((r) => setTimeout(r, 250));
  }
}

export const useRunPanel = create<RunPanelState>(() => ({
  workflowId: null,
  live: emptyRun(),
  busy: false,
  trace: null,
  replayId: null,
  history: [],
  error: null,
  chatId: null,
  messages: [],
  chatTurn: false,
  runErrors: {},

  reset: (workflowId) => {
    abort?.abort();
    abort = null;
    useRunStatus.getState().clear();
    set({ workflowId, live: emptyRun(), busy: false, trace: null, replayId: null, history: [], error: null,
      chatId: null, messages: [], chatTurn: false });
  },

  start: async (inputs, message) => {
    const { workflowId } = get();
    if (!workflowId) return;
    const controller = begin();
    useRunStatus.getState().clear();
    set({ live: emptyRun(), busy: true, trace: null, replayId: null, error: null, chatTurn: false });
    const frames = streamRunFrames('POST', `/v1/workflows/${encodeURIComponent(workflowId)}/runs?draft=true`,
      { inputs, message, response_mode: 'streaming' }, controller.signal);
    await follow(frames, controller);
  },

  stop: async () => {
    const { live } = get();
    if (!live.runId) return;
    try {
      await request('POST', `/v1/runs/${encodeURIComponent(live.runId)}/stop`);
    } catch (e) {
      set({ error: message(e) });
    }
  },

  answer: async (interruptId, answer, runIdGiven, text) => {
    const runId = runIdGiven ?? get().live.runId;
    if (!runId) return;
    // answering a question of another run than the one followed (a chat message
    // loaded from the store): follow that run from its first event
    if (get().live.runId !== runId) set({ live: { ...emptyRun(), runId, chatId: get().chatId } });
    try {
      await request('POST', `/v1/runs/${encodeURIComponent(runId)}/resume`,
        { body: { answers: { [interruptId]: answer }, message: get().chatTurn ? text : undefined } });
    } catch (e) {
      set({ error: message(e) });
      return;
    }
    const controller = begin();
    const shown: ChatMessage[] = get().chatTurn && text ? [...get().messages,
      { id: `local-${Date.now()}`, role: 'user', status: 'done', text, parts: [{ type: 'text', text }] }] : get().messages;
    set({ busy: true, error: null, trace: null, messages: shown, live: { ...get().live, status: 'running', answer: '',
      reasoning: '', interrupts: get().live.interrupts.filter((i) => i.id !== interruptId) } });
    const frames = streamRunFrames('GET', `/v1/runs/${encodeURIComponent(runId)}/events?after=${get().live.lastSeq}`,
      undefined, controller.signal);
    await follow(frames, controller);
  },

  loadHistory: async () => {
    const { workflowId } = get();
    if (!workflowId) return;
    try {
      const list = await api.listRuns({ workflow_id: workflowId, limit: 20 });
      if (get().workflowId === workflowId) set({ history: list.runs });
    } catch (e) {
      set({ error: message(e) });
    }
  },

  replay: async (runId) => {
    if (!runId) {
      set({ replayId: null });
      showStatuses(get().live.nodes);
      return;
    }
    try {
      const detail = await api.getRun(runId);
      set({ replayId: runId, trace: detail, error: null });
      showStatuses(statusesFromDetail(detail.node_runs ?? []));
    } catch (e) {
      set({ error: message(e) });
    }
  },

  rerun: async (runId, nodeId) => {
    const controller = begin();
    useRunStatus.getState().clear();
    set({ live: emptyRun(), busy: true, trace: null, replayId: null, error: null, chatTurn: false });
    const frames = streamRunFrames('POST', `/v1/runs/${encodeURIComponent(runId)}/rerun`,
      { node_id: nodeId, response_mode: 'streaming' }, controller.signal);
    await follow(frames, controller);
  },

  sendChat: async (text, inputs) => {
    const { workflowId } = get();
    if (!workflowId) return false;
    const before = { chatId: get().chatId, messages: get().messages };
    const chatId = before.chatId ?? newChatId();
    const controller = begin();
    useRunStatus.getState().clear();
    const pending: ChatMessage = { id: `local-${Date.now()}`, role: 'user', status: 'done', text, parts: [{ type: 'text', text }] };
    set({ chatId, chatTurn: true, busy: true, error: null, trace: null, replayId: null,
      live: { ...emptyRun(), chatId }, messages: [...get().messages, pending] });
    const frames = streamRunFrames('POST', `/v1/workflows/${encodeURIComponent(workflowId)}/runs?draft=true`,
      { inputs, chat_id: chatId, message: text, response_mode: 'streaming' }, controller.signal);
    await follow(frames, controller);
    if (get().live.runId || !get().error || get().chatId !== chatId) return true;
    set({ chatId: before.chatId, messages: before.messages });
    return false;
  },

  loadRunError: async (runId) => {
    if (get().runErrors[runId]) return;
    try {
      const detail = await api.getRun(runId);
      const text = runErrorText(detail.error);
      if (text) set((s) => ({ runErrors: { ...s.runErrors, [runId]: text } }));
    } catch { /* the bubble keeps its generic text */ }
  },

  newChat: () => {
    abort?.abort();
    abort = null;
    useRunStatus.getState().clear();
    set({ chatId: null, messages: [], live: emptyRun(), busy: false, trace: null, chatTurn: true });
  },

  loadMessages: async () => {
    const { chatId } = get();
    if (!chatId) return;
    try {
      const list = await request<{ messages: ChatMessage[] }>('GET', `/v1/chats/${encodeURIComponent(chatId)}/messages`);
      if (get().chatId === chatId) set({ messages: list.messages });
    } catch (e) {
      set({ error: message(e) });
    }
  },
}));

export { label as statusLabel };
