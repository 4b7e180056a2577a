/**
 * The per-node trace of a stored run (`GET /v1/runs/{id}`): for every top-level node
 * run its title (the id as secondary text), status, duration, attempts, tokens and
 * cost, and, opened, its resolved inputs, outputs, error, reuse by a re-run, and the
 * readable parts of its kind (src/run/TraceParts.tsx): an iteration's or loop's items,
 * an agent's timeline, a model node's sent messages, the quotes a knowledge search found
 * and a chat answer cites. Body node runs show under their
 * container's items, not in the top list. A run of one node alone says so in its head,
 * and the values it was given show as `given`. "Re-run from this node" starts a new run
 * from it with the current draft (`onRerun`).
 */
import { useMemo } from 'react';
import { useLanguage, useT } from '../i18n';
import { useEditor } from '../store/editor';
import { KnowledgeTrace } from '../knowledge/KnowledgeTrace';
import { statusLabel } from './store';
import { titleOf, useNodeTitles, withTitle, NodeName } from './titles';
import { AgentTimeline, ItemsView, Json, SentMessages, seconds } from './TraceParts';
import type { NodeRunOut, RunDetail } from '../api/types';
import { tokensLabel, tokensShort } from './usage';

/** A node run's or round's tokens, marked `~` with a hint when they were estimated. */
function Tokens({ tokensIn, tokensOut, estimated }: { tokensIn: number; tokensOut: number; estimated: boolean }) {
  const lang = useLanguage((s) => s.lang);
  const { text, title } = tokensShort(lang, tokensIn, tokensOut, estimated);
  return <span title={title} className={estimated ? 'estimated' : undefined}>{text}</span>;
}

export function Trace({ run, onRerun, busy }: { run: RunDetail; onRerun: (nodeId: string) => void; busy: boolean }) {
  const t = useT();
  const lang = useLanguage((s) => s.lang);
  const select = useEditor((s) => s.select);
  const nodes = useEditor((s) => s.nodes);
  const titles = useNodeTitles();
  const onCanvas = useMemo(() => new Set(nodes.map((n) => n.id)), [nodes]);
  const { top, body } = useMemo(() => {
    const inside = new Map<string, NodeRunOut[]>();
    const outer: NodeRunOut[] = [];
    for (const nr of run.node_runs ?? []) {
      if (nr.loop_id) inside.set(nr.loop_id, [...(inside.get(nr.loop_id) ?? []), nr]);
      else outer.push(nr);
    }
    return { top: outer, body: inside };
  }, [run.node_runs]);
  const single = run.kind === 'single_node' && run.node_id;
  return (
    <div className="trace" data-testid="trace">
      <div className="trace-head">
        <strong>{t('run.trace.title')}</strong>{' '}
        <span className={`badge run-${run.status}`} data-testid="trace-status">{statusLabel(run.status)}</span>{' '}
        {single && <span className="badge" data-testid="trace-single">{t('run.trace.singleNode', { title: titleOf(titles, run.node_id) })}</span>}{' '}
        <span className="muted">{seconds(run.duration_s)} · <span data-testid="trace-tokens" title={run.usage_estimated ? t('run.trace.estimatedHint') : undefined}>
          {tokensLabel(lang, run.tokens_in ?? 0, run.tokens_out ?? 0, !!run.usage_estimated)}</span>
          {' · '}{t('run.trace.cost', { cost: (run.cost ?? 0).toFixed(6) })}</span>
      </div>
      <ul className="trace-list">
        {top.map((nr) => {
          const given = Boolean(nr.data?.given);
          return (
            <li key={nr.id} data-testid={`trace-node-${nr.node_id}`} data-given={given || undefined}>
              <details>
                <summary onClick={() => onCanvas.has(nr.node_id) && select([nr.node_id])}>
                  <span className={`badge run-${nr.status}`}>{given ? t('run.trace.given') : statusLabel(nr.status)}</span>{' '}
                  <NodeName titles={titles} nodeId={nr.node_id} />{' '}
                  <span className="muted">{nr.kind} · {seconds(nr.duration_s)}
                    {nr.attempts > 1 ? ` · ${t('run.trace.attempts', { count: nr.attempts })}` : ''}
                    {nr.usage ? <> · <Tokens tokensIn={nr.usage.tokens_in} tokensOut={nr.usage.tokens_out}
                      estimated={!!nr.usage.estimated} /> · ${(nr.usage.cost ?? 0).toFixed(6)}</> : ''}
                    {nr.reused_from ? ` · ${t('run.trace.reused')}` : ''}</span>
                </summary>
                <div className="trace-body">
                  {nr.error && <div className="banner error" data-testid={`trace-error-${nr.node_id}`}>
                    {withTitle(titles, nr.error.message, nr.node_id)}</div>}
                  {!given && <><h5>{t('run.trace.inputs')}</h5><Json value={nr.inputs} testId={`trace-inputs-${nr.node_id}`} /></>}
                  <KnowledgeTrace nodeRun={nr} />
                  <h5>{t('run.trace.outputs')}</h5><Json value={nr.outputs} testId={`trace-outputs-${nr.node_id}`} />
                  <SentMessages nodeRun={nr} />
                  <ItemsView container={nr} bodyRuns={body.get(nr.node_id) ?? []} titles={titles} />
                  <AgentTimeline nodeRun={nr} />
                  {!given && !single && onCanvas.has(nr.node_id) && (
                    <button type="button" data-testid={`rerun-${nr.node_id}`} disabled={busy}
                      onClick={() => onRerun(nr.node_id)}>{t('run.rerunFrom')}</button>
                  )}
                </div>
              </details>
            </li>
          );
        })}
      </ul>
    </div>
  );
}
