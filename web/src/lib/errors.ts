/**
 * The text of the server's error problems, whatever their shape. The API sends
 * `problems` as plain strings (a run's inputs that do not fit: `'name' is required`), as
 * compile problems (`{code, severity, node_id, edge_id, path, message}`) or as request
 * validation errors (`{loc, message, code}`); the UI shows every one of them after the
 * error's message, so a person learns what to fix without opening the network tab.
 * Pure (no React, no fetch): unit-tested with vitest.
 */

function location(p: Record<string, unknown>): string {
  const parts: string[] = [];
  if (typeof p.node_id === 'string' && p.node_id) parts.push(p.node_id);
  const path = p.path ?? p.field ?? p.loc;
  if (Array.isArray(path) && path.length) parts.push(path.map(String).join('.'));
  else if (typeof path === 'string' && path) parts.push(path);
  return parts.join('.');
}

/** One problem as a line of text: a string as it is; an object as `where: message`
 * (where = its node id and path or loc, when given; its JSON when it has no message);
 * null or undefined as ''. */
export function problemText(problem: unknown): string {
  if (problem == null) return '';
  if (typeof problem !== 'object') return String(problem).trim();
  const p = problem as Record<string, unknown>;
  const raw = p.message ?? p.msg ?? p.detail ?? p.error;
  const message = typeof raw === 'string' ? raw.trim() : raw == null ? '' : problemText(raw);
  if (!message) return JSON.stringify(problem);
  const where = location(p);
  return where && !message.startsWith(where) ? `${where}: ${message}` : message;
}

/** `message: problem 1; problem 2` - every problem's text after the message (a problem
 * the message already quotes is not repeated; a trailing colon of the message is not
 * doubled, nor left dangling when there are no problems). */
export function withProblems(message: string, problems: unknown): string {
  const head = (message ?? '').trim().replace(/[\s:;]+$/, '');
  const list = Array.isArray(problems) ? problems : problems == null ? [] : [problems];
  const texts = [...new Set(list.map(problemText).filter((text) => text && !head.includes(text)))];
  if (!texts.length) return head;
  return head ? `${head}: ${texts.join('; ')}` : texts.join('; ');
}
