/**
 * "Run this node" in the node's settings panel (Dify's "run this step"): what the node
 * reads, as the server's compiler lists it (`GET /v1/workflows/{id}/nodes/{node}/run`:
 * reference keys such as `start.query`, with their types), prefilled with the values of
 * the node's last run; Run sends the values typed (`POST` on the same path, the draft
 * saved first) and shows the result - status, duration, outputs or error - as the
 * node's last run. The node's badge on the canvas shows it too, and the run joins the
 * History tab (kind `single_node`).
 *
 * A value is read by its declared type: text as typed for `string`, a number, `true` /
 * `false`, JSON for objects, arrays and references of no declared type (text when it is
 * not JSON). A field left empty is left to the node's last run.
 */
import { useCallback, useEffect, useState } from 'react';
import { request } from '../api/client';
import { t as translate, useT } from '../i18n';
import { useEditor } from '../store/editor';
import { saveNow } from '../store/persistence';
import { useRunStatus } from '../store/runStatus';
import { statusLabel, useRunPanel } from './store';
import { Json, seconds } from './TraceParts';
import { titleOf, titledError, useNodeTitles } from './titles';
import type { NodeRunOut } from '../api/types';

interface ReadRef { key: string; scope: string; node?: string | null; field?: string | null; type?: string | null;
  optional: boolean }
interface NodeInfo { node_id: string; reads: ReadRef[]; last: { run_id: string; node_run: NodeRunOut;
  values: Record<string, unknown> } | null }
interface RunResult { run_id: string; status: string; node_run: NodeRunOut | null;
  error?: { message?: string; node_id?: string | null } | null; duration_s?: number | null }

function asText(value: unknown): string {
  if (value === undefined) return '';
  return typeof value === 'string' ? value : JSON.stringify(value, null, 2);
}

/** The value of a field as its type reads it; throws on JSON that does not parse where JSON is needed. */
function parseField(ref: ReadRef, text: string): unknown {
  if (ref.type === 'string') return text;
  if (ref.type === 'number') {
    const n = Number(text);
    if (text.trim() === '' || Number.isNaN(n)) throw new Error(ref.type);
    return n;
  }
  if (ref.type === 'boolean') {
    if (!['true', 'false'].includes(text.trim())) throw new Error(ref.type);
    return text.trim() === 'true';
  }
  try {
    return JSON.parse(text);
  } catch {
    if (ref.type && ref.type !== 'any') throw new Error(ref.type);
    return text;
  }
}

function path(workflowId: string, nodeId: string): string {
  return `/v1/workflows/${encodeURIComponent(workflowId)}/nodes/${encodeURIComponent(nodeId)}/run`;
}

export function NodeRunSection({ nodeId }: { nodeId: string }) {
  const t = useT();
  const workflowId = useEditor((s) => s.workflowId);
  const titles = useNodeTitles();
  const [open, setOpen] = useState(false);
  const [info, setInfo] = useState<NodeInfo | null>(null);
  const [draft, setDraft] = useState<Record<string, string>>({});
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const [result, setResult] = useState<RunResult | null>(null);

  const load = useCallback(async () => {
    if (!workflowId) return;
    try {
      await saveNow();
      const got = await request<NodeInfo>('GET', path(workflowId, nodeId));
      setInfo(got);
      const last = got.last?.node_run;
      if (last && !useRunStatus.getState().byNode[nodeId]) {  // no run shown on the canvas: the node's last run is
        useRunStatus.getState().setNodeStatus(nodeId, { status: last.status, label: statusLabel(last.status),
          detail: last.error?.message ?? seconds(last.duration_s) });
      }
      setDraft(Object.fromEntries(got.reads.map((r) => [r.key, asText(got.last?.values[r.key])])));
      setError(null);
    } catch (e) {
      setError(translate('runNode.loadFailed', { message: (e as Error).message }));
    }
  }, [workflowId, nodeId]);
  useEffect(() => { if (open) void load(); }, [open, load]);

  const run = async () => {
    if (!workflowId || !info) return;
    const inputs: Record<string, unknown> = {};
    for (const ref of info.reads) {
      const text = draft[ref.key] ?? '';
      if (text === '') continue;  // left to the node's last run (or refused by name when it has none)
      try {
        inputs[ref.key] = parseField(ref, text);
      } catch {
        setError(t('runNode.badJson', { key: ref.key, type: ref.type ?? 'JSON' }));
        return;
      }
    }
    setBusy(true);
    setError(null);
    try {
      await saveNow();
      const done = await request<RunResult>('POST', path(workflowId, nodeId), { body: { inputs, from_last: true } });
      setResult(done);
      const nr = done.node_run;
      const status = nr?.status ?? done.status;
      useRunStatus.getState().setNodeStatus(nodeId, { status, label: statusLabel(status),
        detail: nr?.error?.message ?? seconds(nr?.duration_s) });
      void useRunPanel.getState().loadHistory();
      await load();
    } catch (e) {
      setError((e as Error).message);
    } finally {
      setBusy(false);
    }
  };

  const last = result?.node_run ?? info?.last?.node_run ?? null;
  return (
    <details className="node-run advanced" data-testid="node-run" open={open}
      onToggle={(e) => setOpen((e.target as HTMLDetailsElement).open)}>
      <summary data-testid="node-run-toggle">{t('runNode.title')}</summary>
      <p className="field-help">{t('runNode.hint')}</p>
      {error && <div className="banner error" role="alert" data-testid="node-run-error">{error}</div>}
      {info && (
        <>
          <h5>{t('runNode.reads')}</h5>
          {info.reads.length === 0 && <div className="muted">{t('runNode.none')}</div>}
          {info.reads.map((ref) => (
            <label key={ref.key} className="field">
              <span className="field-label">
                <code>{ref.key}</code>{ref.node ? <span className="muted"> {titleOf(titles, ref.node)}</span> : null}
                <span className="muted"> {ref.type ?? 'any'}{ref.optional ? ` · ${t('runNode.optional')}` : ''}</span>
              </span>
              <textarea rows={ref.type === 'object' || ref.type === 'array' ? 3 : 1} data-testid={`node-run-input-${ref.key}`}
                value={draft[ref.key] ?? ''} onChange={(e) => setDraft({ ...draft, [ref.key]: e.target.value })} />
            </label>
          ))}
          <button type="button" className="primary" data-testid="node-run-start" disabled={busy}
            onClick={() => void run()}>{busy ? t('runNode.running') : t('runNode.run')}</button>
          <h5>{t('runNode.last')}</h5>
          {!last && <div className="muted" data-testid="node-run-never">{t('runNode.never')}</div>}
          {last && (
            <div className="node-run-last" data-testid="node-run-last" data-status={last.status}>
              <span className={`badge run-${last.status}`} data-testid="node-run-status">{statusLabel(last.status)}</span>{' '}
              <span className="muted" data-testid="node-run-duration">{seconds(last.duration_s)}</span>
              {last.error && <div className="banner error" data-testid="node-run-failure">
                {titledError(titles, `${nodeId}: ${last.error.message}`)}</div>}
              <Json value={last.outputs} testId="node-run-outputs" />
            </div>
          )}
        </>
      )}
    </details>
  );
}
