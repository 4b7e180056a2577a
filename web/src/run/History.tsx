/**
 * The History tab of the run panel: the workflow's runs, newest first (`GET /v1/runs`),
 * each row with its status, when it started, its duration, the first input or the
 * message (`preview`), its tokens, for a run of one node alone that node's title, and for
 * a failed run the title of the node it failed at.
 * Selecting a row replays it (its statuses on the canvas, its trace).
 */
import { useEffect } from 'react';
import { formatTime, useLanguage, useT } from '../i18n';
import { statusLabel, useRunPanel } from './store';
import { seconds } from './TraceParts';
import { titleOf, useNodeTitles } from './titles';

/** The fields of a listed run the rows show (newer than the generated API types). */
interface Listed {
  run_id: string;
  status: string;
  created_at?: number;
  workflow_version?: string | null;
  chat_id?: string | null;
  duration_s?: number | null;
  tokens_in?: number;
  tokens_out?: number;
  kind?: string;
  node_id?: string | null;
  preview?: string | null;
  error?: { node_id?: string | null } | null;
}

export function History() {
  const t = useT();
  const lang = useLanguage((st) => st.lang);
  const history = useRunPanel((s) => s.history) as unknown as Listed[];
  const replayId = useRunPanel((s) => s.replayId);
  const replay = useRunPanel((s) => s.replay);
  const load = useRunPanel((s) => s.loadHistory);
  const titles = useNodeTitles();
  useEffect(() => { void load(); }, [load]);
  return (
    <div className="run-history" data-testid="run-history">
      <div className="history-head">
        <button type="button" className="link" data-testid="history-refresh" onClick={() => void load()}>{t('run.history.refresh')}</button>
        {replayId && <button type="button" className="link" data-testid="history-live" onClick={() => void replay(null)}>{t('run.history.live')}</button>}
      </div>
      {history.length === 0 && <div className="muted">{t('run.history.empty')}</div>}
      <ul>
        {history.map((r) => (
          <li key={r.run_id}>
            <button type="button" className={`history-item${replayId === r.run_id ? ' selected' : ''}`}
              data-testid={`history-run-${r.run_id}`} data-status={r.status} data-kind={r.kind ?? 'workflow'}
              onClick={() => void replay(r.run_id)}>
              <span className={`badge run-${r.status}`}>{statusLabel(r.status)}</span>{' '}
              <span>{formatTime(r.created_at ?? 0, lang, true)}</span>{' '}
              <span className="history-duration">{seconds(r.duration_s)}</span>{' '}
              {r.kind === 'single_node' && r.node_id && (
                <span className="badge history-node">{t('run.history.node', { title: titleOf(titles, r.node_id) })}</span>)}{' '}
              {r.status === 'failed' && r.error?.node_id && (
                <span className="history-failed-at">{t('run.history.failedAt', { title: titleOf(titles, r.error.node_id) })}</span>)}{' '}
              {r.preview && <span className="history-preview" title={r.preview}>“{r.preview}”</span>}{' '}
              <span className="muted">{t('run.history.tokens', { count: (r.tokens_in ?? 0) + (r.tokens_out ?? 0) })}
                {' · '}{r.workflow_version ?? ''} · {r.run_id.slice(0, 8)}{r.chat_id ? ' · 💬' : ''}</span>
            </button>
          </li>
        ))}
      </ul>
    </div>
  );
}
