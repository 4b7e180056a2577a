/**
 * Conversation variables as a person types them: a value is typed in a text box and read
 * by the variable's declared type (the engine refuses a value that does not fit it), and
 * shown back the same way. Shared by the workflow panel (defaults) and the chat preview
 * (a chat's current values).
 */
import type { Json } from './workflow';

export type Parsed = { ok: true; value: Json } | { ok: false; error: string };

/** `text` read as a value of `type` (`string`, `number`, `boolean`, `object`, `array`,
 * `any`...); an empty box is null (the variable starts empty). */
export function parseTyped(type: string | undefined, text: string): Parsed {
  const kind = type ?? 'string';
  if (kind === 'string') return { ok: true, value: text };
  const trimmed = text.trim();
  if (!trimmed) return { ok: true, value: null };
  if (kind === 'number') {
    const n = Number(trimmed);
    return Number.isFinite(n) ? { ok: true, value: n } : { ok: false, error: 'number' };
  }
  if (kind === 'boolean') {
    if (trimmed === 'true' || trimmed === 'false') return { ok: true, value: trimmed === 'true' };
    return { ok: false, error: 'boolean' };
  }
  try {
    const value = JSON.parse(trimmed) as Json;
    if (kind === 'array' && !Array.isArray(value)) return { ok: false, error: 'array' };
    if (kind === 'object' && (typeof value !== 'object' || value === null || Array.isArray(value))) {
      return { ok: false, error: 'object' };
    }
    return { ok: true, value };
  } catch {
    return kind === 'any' ? { ok: true, value: text } : { ok: false, error: kind };
  }
}

/** `value` as the text box shows it: a string as it is, null as empty, others as JSON. */
export function showTyped(value: Json | undefined): string {
  if (value === undefined || value === null) return '';
  return typeof value === 'string' ? value : JSON.stringify(value);
}
