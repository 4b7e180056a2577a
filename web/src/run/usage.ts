/**
 * How the trace writes token counts. A count the model server did not report was
 * estimated by Flowloom (a local count of the text, the completion clamped to the
 * request's `max_tokens`); it is written `~20/93 tokens (estimated)` so nobody reads
 * an estimate as a count (the run's `usage_estimated`, a node run's `usage.estimated`).
 */
import { translate, type Language } from '../i18n';

/** `tokens 20/93`, or `~20/93 tokens (estimated)` when `estimated`, in `lang`. */
export function tokensLabel(lang: Language, tokensIn: number, tokensOut: number, estimated: boolean): string {
  const key = estimated ? 'run.trace.tokensEstimated' : 'run.trace.tokens';
  return translate(lang, key, { in: tokensIn, out: tokensOut });
}

/** The short form of a node run or an agent round: `20/93`, or `~20/93` with a tooltip's text. */
export function tokensShort(lang: Language, tokensIn: number, tokensOut: number, estimated: boolean): {
  text: string; title?: string;
} {
  if (!estimated) return { text: `${tokensIn}/${tokensOut}` };
  return { text: `~${tokensIn}/${tokensOut}`, title: translate(lang, 'run.trace.estimatedHint') };
}
