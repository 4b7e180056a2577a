/**
 * The readable parts of a node run in the trace (what `GET /v1/runs/{id}` records):
 *
 * - {@link ItemsView}: an iteration's (or loop's) per-item view - per item (round) its
 *   value, status and duration, and opened, each body node's inputs, outputs and error;
 * - {@link AgentTimeline}: an agent's rounds as a timeline - the model's thought, each
 *   tool it called with its arguments (pretty JSON) and the tool's result, then the answer;
 * - {@link SentMessages}: what a model node actually sent (the rendered messages, as the
 *   engine kept them: capped, secrets masked) and what came back.
 */
import { translate, useLanguage, useT } from '../i18n';
import { statusLabel } from './store';
import { NodeName, type Titles } from './titles';
import type { AgentRound, BodyRun, NodeRunOut } from '../api/types';
import { tokensLabel } from './usage';

export function Json({ value, testId }: { value: unknown; testId?: string }) {
  return <pre className="json" data-testid={testId}>{JSON.stringify(value, null, 2)}</pre>;
}

export function seconds(s: number | null | undefined): string {
  if (s == null) return '—';
  return s < 1 ? `${Math.round(s * 1000)} ms` : `${s.toFixed(2)} s`;
}

/** A short one-line view of a value (an item): text as is, anything else as JSON, cut. */
function short(value: unknown): string {
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  return text && text.length > 80 ? `${text.slice(0, 79)}…` : text ?? '';
}

/** One body node run as the items view shows it. */
export interface BodyRow {
  id: string; node_id: string; status: string; inputs: unknown; outputs: unknown;
  error: { message: string } | null; started_at: number | null; finished_at: number | null;
  duration_s: number | null; iteration: number | null;
}
interface ItemGroup { index: number; runs: BodyRow[]; status: string; duration: number | null; error?: string }
interface ItemRecord { index: number; status?: string; runs: BodyRow[]; error?: string }

const num = (v: unknown): number | null => (typeof v === 'number' ? v : null);

/** A body node run: from `GET /v1/runs/{id}` (a loop drawn with back-edges), or as a
 * container's record keeps it (`BodyRun.node_runs`: stored node runs, read field by field). */
function bodyRow(r: NodeRunOut | Record<string, unknown>): BodyRow {
  const error = r.error && typeof r.error === 'object' && 'message' in r.error ? { message: String(r.error.message) } : null;
  const started = num(r.started_at);
  const finished = num(r.finished_at);
  const given = num(r.duration_s);
  return { id: String(r.id), node_id: String(r.node_id), status: String(r.status), inputs: r.inputs, outputs: r.outputs,
    error, started_at: started, finished_at: finished, iteration: num(r.iteration),
    duration_s: given ?? (started != null && finished != null ? Math.max(0, finished - started) : null) };
}

function recordOf(rec: BodyRun): ItemRecord {
  return { index: rec.index ?? 0, status: rec.status, runs: (rec.node_runs ?? []).map(bodyRow), error: rec.error?.message };
}

/** The items (rounds) of `container`: from the records its node run keeps (`data.items`
 * of an iteration, `data.rounds` of a loop: each item's node runs), else from the body
 * node runs listed apart (a loop drawn with back-edges), grouped by item. */
export function itemGroups(container: NodeRunOut, bodyRuns: NodeRunOut[]): ItemGroup[] {
  const kept = container.data?.items ?? container.data?.rounds;
  const records: ItemRecord[] = kept ? kept.map(recordOf)
    : [...new Set(bodyRuns.map((r) => r.iteration ?? 0))].map((index) => ({
      index, runs: bodyRuns.filter((r) => (r.iteration ?? 0) === index).map(bodyRow) }));
  return records.map((rec) => {
    const runs = rec.runs;
    const starts = runs.map((r) => r.started_at).filter((v): v is number => v != null);
    const ends = runs.map((r) => r.finished_at).filter((v): v is number => v != null);
    const status = rec.status ?? (runs.some((r) => r.status === 'failed') ? 'failed'
      : runs.length && runs.every((r) => r.status === 'skipped') ? 'skipped' : 'succeeded');
    const duration = starts.length && ends.length ? Math.max(0, Math.max(...ends) - Math.min(...starts)) : null;
    return { index: rec.index, runs, status, duration, error: rec.error };
  }).sort((a, b) => a.index - b.index);
}

export function ItemsView({ container, bodyRuns, titles }: { container: NodeRunOut; bodyRuns: NodeRunOut[];
  titles: Titles }) {
  const t = useT();
  const groups = itemGroups(container, bodyRuns);
  if (!groups.length) return null;
  const items = container.inputs?.items;
  const isIteration = Array.isArray(items);
  return (
    <div className="trace-items" data-testid={`trace-items-${container.node_id}`}>
      <h5>{t('run.trace.items', { count: groups.length })}</h5>
      <ol>
        {groups.map((g) => (
          <li key={g.index} data-testid={`trace-item-${container.node_id}-${g.index}`} data-status={g.status}>
            <details>
              <summary>
                <span className={`badge run-${g.status}`}>{statusLabel(g.status)}</span>{' '}
                <strong>{t(isIteration ? 'run.trace.item' : 'run.trace.round', { index: g.index })}</strong>{' '}
                {isIteration && <code className="item-value">{short(items[g.index])}</code>}{' '}
                <span className="muted">{seconds(g.duration)}</span>
              </summary>
              {g.error && <div className="banner error">{g.error}</div>}
              <ul className="item-runs">
                {g.runs.map((r) => (
                  <li key={r.id} data-testid={`trace-item-node-${container.node_id}-${g.index}-${r.node_id}`}>
                    <span className={`badge run-${r.status}`}>{statusLabel(r.status)}</span>{' '}
                    <NodeName titles={titles} nodeId={r.node_id} />{' '}
                    <span className="muted">{seconds(r.duration_s)}</span>
                    {r.error && <div className="banner error">{r.error.message}</div>}
                    <div className="item-io">
                      <div><h5>{t('run.trace.inputs')}</h5><Json value={r.inputs} /></div>
                      <div><h5>{t('run.trace.outputs')}</h5><Json value={r.outputs} /></div>
                    </div>
                  </li>
                ))}
              </ul>
            </details>
          </li>
        ))}
      </ol>
    </div>
  );
}

/** A round's tokens, marked `~` with a hint when the server did not count them. */
function RoundTokens({ usage }: { usage?: AgentRound['usage'] }) {
  const lang = useLanguage((s) => s.lang);
  const estimated = !!usage?.estimated;
  return <span title={estimated ? translate(lang, 'run.trace.estimatedHint') : undefined}
    className={estimated ? 'estimated' : undefined}>
    {tokensLabel(lang, usage?.tokens_in ?? 0, usage?.tokens_out ?? 0, estimated)}</span>;
}


/** Arguments as pretty JSON when they parse, else as sent. */
function pretty(args: unknown): string {
  if (typeof args !== 'string') return args == null ? '' : JSON.stringify(args, null, 2);
  if (!args) return '';
  try {
    return JSON.stringify(JSON.parse(args), null, 2);
  } catch {
    return args;
  }
}

export function AgentTimeline({ nodeRun }: { nodeRun: NodeRunOut }) {
  const t = useT();
  const agent = nodeRun.data?.agent;
  const rounds: AgentRound[] = agent?.trace ?? [];
  const results = agent?.tool_results ?? {};
  const plan = nodeRun.outputs?.plan;
  if (!rounds.length && plan == null) return null;
  return (
    <div className="agent-trace" data-testid={`trace-timeline-${nodeRun.node_id}`}>
      {rounds.length > 0 && <h5>{t('run.trace.timeline', { count: rounds.length })}</h5>}
      <ol className="timeline">
        {rounds.map((r, i) => {
          const calls = (r.response?.tool_calls ?? []).map((c) => ({ id: String(c.id ?? ''), name: String(c.name ?? ''),
            arguments: c.arguments }));
          const text = r.response?.text ?? '';
          return (
            <li key={i} data-testid={`trace-round-${nodeRun.node_id}-${i}`}>
              <div className="muted">{t('run.trace.round', { index: i + 1 })} · {Math.round(r.elapsed_ms ?? 0)} ms ·{' '}
                <RoundTokens usage={r.usage} /></div>
              {text && (
                <div className={calls.length ? 'step thought' : 'step answer'}
                  data-testid={`trace-${calls.length ? 'thought' : 'answer'}-${nodeRun.node_id}-${i}`}>
                  <span className="step-label">{t(calls.length ? 'run.trace.thought' : 'run.trace.answer')}</span>
                  <div className="round-text">{text}</div>
                </div>
              )}
              {typeof r.error?.message === 'string' && <div className="banner error">{r.error.message}</div>}
              {calls.map((c, j) => (
                <div key={c.id || j} className="step tool-call" data-testid={`trace-call-${nodeRun.node_id}-${i}-${j}`}>
                  <span className="step-label">🔧 {t('run.trace.callsTool', { tool: c.name })}</span>
                  <div className="call-part"><span className="muted">{t('run.trace.arguments')}</span>
                    <pre className="json">{pretty(c.arguments)}</pre></div>
                  <div className="call-part"><span className="muted">{t('run.trace.result')}</span>
                    {c.id && c.id in results ? <pre className="json tool-result">{results[c.id]}</pre>
                      : <span className="muted"> {t('run.trace.noResult')}</span>}</div>
                </div>
              ))}
            </li>
          );
        })}
      </ol>
      {plan != null && <><h5>{t('run.trace.plan')}</h5><Json value={plan} /></>}
    </div>
  );
}

export function SentMessages({ nodeRun }: { nodeRun: NodeRunOut }) {
  const t = useT();
  const sent = nodeRun.data?.sent;
  if (!sent?.messages?.length) return null;
  const answer = nodeRun.outputs?.answer;
  return (
    <div className="sent-messages" data-testid={`trace-sent-${nodeRun.node_id}`}>
      <h5>{t('run.trace.sent')}</h5>
      {sent.omitted ? <div className="muted">{t('run.trace.omitted', { count: sent.omitted })}</div> : null}
      {sent.messages.map((m, i) => (
        <div key={i} className={`message role-${m.role}`}>
          <span className="step-label">{m.role}</span>
          <div className="round-text">{m.content}</div>
          {m.truncated ? <div className="muted">{t('run.trace.truncated', { total: m.truncated })}</div> : null}
          {(m.tool_calls ?? []).map((c, j) => <div key={j} className="tool-call">🔧 <code>{c.name}</code> <code>{c.arguments}</code></div>)}
        </div>
      ))}
      {typeof answer === 'string' && (
        <>
          <h5>{t('run.trace.received')}</h5>
          <div className="message role-assistant" data-testid={`trace-received-${nodeRun.node_id}`}>
            <div className="round-text">{answer}</div></div>
        </>
      )}
    </div>
  );
}
