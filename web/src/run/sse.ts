/**
 * Server-sent events over `fetch`: the browser's EventSource cannot send the
 * `Authorization` header, so runs are streamed with a POST (or GET) whose body is read
 * as it arrives and cut into frames here.
 *
 * A frame is `{event, id, data}`: `event` the SSE `event:` (a run event's `type`, or
 * `meta` / `error` / `done`), `id` the run event's `seq` (null for the others) and
 * `data` the parsed JSON of its `data:` lines. Comment lines (`: keep-alive`) are
 * dropped. {@link SseParser} is pure (fed text, returns frames) so it is unit-tested;
 * {@link streamFrames} wires it to a fetch.
 */
import { errorFrom, getApiKey } from '../api/client';

export interface SseFrame {
  event: string;
  id: number | null;
  data: Record<string, unknown>;
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
  let parsed: Record<string, unknown>;
  try {
    parsed = JSON.parse(data.join('\n')) as Record<string, unknown>;
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
