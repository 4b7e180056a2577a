/**
 * What a node may read, as the variable picker shows it. The server decides it
 * (`POST /v1/workflows/scope`) with the compiler's own reference rule, so the picker
 * offers exactly what the compiler accepts: inside a container's body the container's
 * item/index/loop values (never its results), a container's body fields (an
 * iteration's `collect`, a loop's `update`) also its body nodes, elsewhere what is
 * upstream. This module only shapes the answer for display.
 */
import type { ScopeEntryOut } from '../api/types';

export type ScopeEntry = ScopeEntryOut;

/** The picker's groups in display order. */
export const SCOPE_GROUPS = ['node', 'inputs', 'conversation', 'vars', 'env', 'sys'] as const;

/** The top-level config field a form path names (`config-collect` -> `collect`,
 * `config-cases.0.conditions.1.left` -> `cases`); null for paths outside the config. */
export function configField(testId: string | undefined): string | null {
  if (!testId || !testId.startsWith('config-')) return null;
  const field = testId.slice('config-'.length).split('.')[0];
  return field || null;
}

/** `entries` of `group`, filtered by `query` (case-insensitive, on the path). */
export function entriesOf(entries: readonly ScopeEntry[], group: string, query: string): ScopeEntry[] {
  const q = query.trim().toLowerCase();
  return entries.filter((e) => e.group === group && (!q || e.path.toLowerCase().includes(q)));
}

/** Problem codes of a reference the compiler refuses where it stands. */
export const SCOPE_PROBLEMS: ReadonlySet<string> = new Set(['unknown_node', 'unknown_output', 'not_ancestor',
  'unknown_input', 'unknown_variable', 'unknown_sys', 'unknown_conversation_variable']);

/** The compiler's problem path of a form path: `config-cases.0.left` -> `config.cases[0].left`. */
export function compilerPath(testId: string): string {
  const rest = testId.startsWith('config-') ? testId.slice('config-'.length) : testId;
  return `config${rest.split('.').map((seg) => (/^\d+$/.test(seg) ? `[${seg}]` : `.${seg}`)).join('')}`;
}
