/**
 * The per-node trace of a stored run (`GET /v1/runs/{id}`): for every node run its
 * status, duration, attempts, tokens and cost, and, opened, its resolved inputs,
 * outputs, error, reuse by a re-run, and an agent's rounds (model calls with their tool
 * calls) and plan. "Re-run from this node" starts a new run from it with the current
 * draft (`onRerun`).
 */
import { useMemo } from 'react';
import { useLanguage, useT } from '../i18n';
import { useEditor } from '../store/editor';
import { statusLabel } from './store';
import type { NodeRunTrace, RunTrace } from './types';
import { tokensLabel, tokensShort } from './usage';

type NodeRun = NodeRunTrace;

function Json({ value, testId }: { value: unknown; testId?: string }) {
  return <pre className="json" data-testid={testId}>{JSON.stringify(value, null, 2)}</pre>;
}

interface AgentRound {
  usage?: { tokens_in?: number; tokens_out?: number; estimated?: boolean };
  elapsed_ms?: number;
  response?: { text?: string; tool_calls?: { id?: string; name?: string; arguments?: string }[] };
}

function Tokens({ tokensIn, tokensOut, estimated }: { tokensIn: number; tokensOut: number; estimated: boolean }) {
  const lang = useLanguage((s) => s.lang);
  const { text, title } = tokensShort(lang, tokensIn, tokensOut, estimated);
  return <span title={title} className={estimated ? 'estimated' : undefined}>{text}</span>;
}

function AgentRounds({ nodeRun }: { nodeRun: NodeRun }) {
  const t = useT();
  const agent = (nodeRun.data as { agent?: { trace?: AgentRound[] } } | undefined)?.agent;
  const rounds = agent?.trace ?? [];
  const plan = (nodeRun.outputs as { plan?: unknown } | null | undefined)?.plan;
  if (!rounds.length && plan == null) return null;
  return (
    <div className="agent-trace">
      {rounds.length > 0 && <h5>{t('run.trace.rounds', { count: rounds.length })}</h5>}
      <ol>
        {rounds.map((r, i) => (
          <li key={i} data-testid={`trace-round-${nodeRun.node_id}-${i}`}>
            <span className="muted">{Math.round(r.elapsed_ms ?? 0)} ms · <Tokens tokensIn={r.usage?.tokens_in ?? 0}
              tokensOut={r.usage?.tokens_out ?? 0} estimated={!!r.usage?.estimated} /></span>
            {r.response?.text ? <div className="round-text">{r.response.text}</div> : null}
            {(r.response?.tool_calls ?? []).map((c, j) => (
              <div key={c.id ?? j} className="tool-call">🔧 <code>{c.name}</code> <code className="muted">{c.arguments}</code></div>
            ))}
          </li>
        ))}
      </ol>
      {plan != null && <><h5>{t('run.trace.plan')}</h5><Json value={plan} /></>}
    </div>
  );
}

function seconds(s: number | null | undefined): string {
  if (s == null) return '—';
  return s < 1 ? `${Math.round(s * 1000)} ms` : `${s.toFixed(2)} s`;
}

export function Trace({ run, onRerun, busy }: { run: RunTrace; onRerun: (nodeId: string) => void; busy: boolean }) {
  const t = useT();
  const lang = useLanguage((s) => s.lang);
  const select = useEditor((s) => s.select);
  const nodes = useEditor((s) => s.nodes);
  const onCanvas = useMemo(() => new Set(nodes.map((n) => n.id)), [nodes]);
  return (
    <div className="trace" data-testid="trace">
      <div className="trace-head">
        <strong>{t('run.trace.title')}</strong>{' '}
        <span className={`badge run-${run.status}`} data-testid="trace-status">{statusLabel(run.status)}</span>{' '}
        <span className="muted">{seconds(run.duration_s)} · <span data-testid="trace-tokens" title={run.usage_estimated ? t('run.trace.estimatedHint') : undefined}>
          {tokensLabel(lang, run.tokens_in ?? 0, run.tokens_out ?? 0, !!run.usage_estimated)}</span>
          {' · '}{t('run.trace.cost', { cost: (run.cost ?? 0).toFixed(6) })}</span>
      </div>
      <ul className="trace-list">
        {run.node_runs.map((nr) => (
          <li key={nr.id} data-testid={`trace-node-${nr.node_id}`}>
            <details>
              <summary onClick={() => onCanvas.has(nr.node_id) && select([nr.node_id])}>
                <span className={`badge run-${nr.status}`}>{statusLabel(nr.status)}</span>{' '}
                <strong>{nr.node_id}</strong>{nr.iteration != null ? ` #${nr.iteration}` : ''}{' '}
                <span className="muted">{nr.kind} · {seconds(nr.duration_s)}
                  {nr.attempts > 1 ? ` · ${t('run.trace.attempts', { count: nr.attempts })}` : ''}
                  {nr.usage ? <> · <Tokens tokensIn={nr.usage.tokens_in} tokensOut={nr.usage.tokens_out}
                    estimated={!!nr.usage.estimated} /> · ${(nr.usage.cost ?? 0).toFixed(6)}</> : ''}
                  {nr.reused_from ? ` · ${t('run.trace.reused')}` : ''}</span>
              </summary>
              <div className="trace-body">
                {nr.error && <div className="banner error" data-testid={`trace-error-${nr.node_id}`}>{nr.error.message}</div>}
                <h5>{t('run.trace.inputs')}</h5><Json value={nr.inputs} testId={`trace-inputs-${nr.node_id}`} />
                <h5>{t('run.trace.outputs')}</h5><Json value={nr.outputs} testId={`trace-outputs-${nr.node_id}`} />
                <AgentRounds nodeRun={nr} />
                {!nr.loop_id && onCanvas.has(nr.node_id) && (
                  <button type="button" data-testid={`rerun-${nr.node_id}`} disabled={busy}
                    onClick={() => onRerun(nr.node_id)}>{t('run.rerunFrom')}</button>
                )}
              </div>
            </details>
          </li>
        ))}
      </ul>
    </div>
  );
}
