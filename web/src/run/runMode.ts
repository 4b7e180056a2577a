/**
 * What the run panel offers for a workflow, decided from the `sys` variables the server
 * says it reads (`system_reads` of the last validate answer) rather than from its text:
 * a node reads `sys.query` through a default it never writes out (a chat or classifier
 * node's prompt), and a prompt that merely mentions `sys.query` does not read it.
 */

export interface RunMode {
  /** Show the message field (sys.query) in the Run tab. */
  showMessage: boolean;
  /** A chat flow: its answer depends on the conversation, so the Chat tab comes first. */
  chatFlow: boolean;
}

/**
 * `systemReads`: the validate answer's `system_reads`, or null while none has arrived
 * (then the message field stays, so a slow server hides nothing). `inputNames`: the
 * declared inputs - one named `query` receives the user's message too.
 *
 * A workflow reading `query` (the message) or `history` (the earlier turns, which only
 * a chat has) is a chat flow, as is one declaring a `query` input.
 */
export function runMode(systemReads: readonly string[] | null, inputNames: readonly string[]): RunMode {
  const queryInput = inputNames.includes('query');
  if (systemReads === null) return { showMessage: true, chatFlow: queryInput };
  const readsQuery = systemReads.includes('query');
  return { showMessage: readsQuery, chatFlow: readsQuery || systemReads.includes('history') || queryInput };
}
