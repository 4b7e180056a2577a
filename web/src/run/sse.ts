/**
 * Server-sent events over `fetch`: the browser's EventSource cannot send the
 * `Authorization` header, so runs are streamed with a POST (or GET) whose body is read
 * as it arrives and cut into frames here.
 *
 * A frame is `{event, id, data}`: `event` the SSE `event:` (a run event's `type`, or
 * `meta` / `error` / `done`), `id` the run event's `seq` (null for the others) and
 * `data` the parsed JSON of its `data:` lines. Comment lines (`: keep-alive`) are
 * dropped. {@link SseParser} is pure (fed text, returns frames) so it is unit-tested;
 * {@link streamFrames} wires it to a fetch, and {@link streamRunFrames} gives the frames
 * of a run's stream with the types of the server's OpenAPI document ({@link RunFrame}).
 */
import { errorFrom, getApiKey } from '../api/client';
import type { ErrorBody, RunEvent, RunStreamDone, RunStreamMeta } from '../api/types';

export interface SseFrame {
  event: string;
  id: number | null;
  data: unknown;
}

/** A frame of a run's event stream, told apart by `event`: `meta` first, then the run's
 * events (a {@link RunEvent}, itself told apart by `data.type`), then `done`, or `error`. */
export type RunFrame =
  | { event: 'meta'; id: number | null; data: RunStreamMeta }
  | { event: 'done'; id: number | null; data: RunStreamDone }
  | { event: 'error'; id: number | null; data: ErrorBody }
  | { event: RunEvent['type']; id: number | null; data: RunEvent };

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null;
}

/**
 * Whether `frame` is a frame of a run's stream: `meta`, `done` or `error` with an object,
 * or a run event whose `type` is its `event`. The data's fields are the ones the server's
 * document gives its schema (RunStreamMeta, RunEvent, RunStreamDone, ErrorBody): the
 * stream is the server's, so a frame that names itself is taken as that type here, once.
 */
export function isRunFrame(frame: SseFrame): frame is RunFrame {
  if (!isObject(frame.data)) return false;
  if (frame.event === 'meta' || frame.event === 'done') return typeof frame.data.run_id === 'string';
  if (frame.event === 'error') return isObject(frame.data.error);
  return frame.data.type === frame.event && typeof frame.data.seq === 'number';
}

/** Incremental SSE parser: `push(text)` returns the frames completed by it. */
export class SseParser {
  private buffer = '';

  push(text: string): SseFrame[] {
    this.buffer += text.replace(/\r\n?/g, '\n');
    const frames: SseFrame[] = [];
    let cut = this.buffer.indexOf('\n\n');
    while (cut >= 0) {
      const frame = parseBlock(this.buffer.slice(0, cut));
      if (frame) frames.push(frame);
      this.buffer = this.buffer.slice(cut + 2);
      cut = this.buffer.indexOf('\n\n');
    }
    return frames;
  }
}

function parseBlock(block: string): SseFrame | null {
  let event = 'message';
  let id: number | null = null;
  const data: string[] = [];
  for (const line of block.split('\n')) {
    if (!line || line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const name = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
    if (name === 'event') event = value;
    else if (name === 'id') id = Number.isFinite(Number(value)) && value !== '' ? Number(value) : null;
    else if (name === 'data') data.push(value);
  }
  if (!data.length) return null;
  let parsed: unknown;
  try {
    parsed = JSON.parse(data.join('\n'));
  } catch {
    parsed = { text: data.join('\n') };
  }
  return { event, id, data: parsed };
}

/**
 * Sends the request with the API key and yields the stream's frames as they arrive.
 * Throws ApiError when the server answers with an error before the stream starts
 * (a 422 naming the problems, a 409, a 429...); aborting `signal` ends the iteration.
 */
export async function* streamFrames(method: string, path: string, body: unknown,
  signal?: AbortSignal): AsyncGenerator<SseFrame> {
  const headers: Record<string, string> = { Accept: 'text/event-stream' };
  const key = getApiKey();
  if (key) headers.Authorization = `Bearer ${key}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal });
  if (!res.ok) throw await errorFrom(res);
  if (!res.body) return;
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  const parser = new SseParser();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      for (const frame of parser.push(decoder.decode(value, { stream: true }))) yield frame;
    }
    for (const frame of parser.push(decoder.decode() + '\n\n')) yield frame;
  } finally {
    reader.releaseLock();
  }
}

/** {@link streamFrames} of a run's event stream, each frame typed ({@link isRunFrame});
 * a frame that is not one of the stream's is skipped. */
export async function* streamRunFrames(method: string, path: string, body: unknown,
  signal?: AbortSignal): AsyncGenerator<RunFrame> {
  for await (const frame of streamFrames(method, path, body, signal)) {
    if (isRunFrame(frame)) yield frame;
  }
}
