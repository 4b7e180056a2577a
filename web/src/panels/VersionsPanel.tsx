/** Published versions: which one runs, a diff of any version against the draft, and
 * restore (publish that version again, as a new version). */
import { useCallback, useEffect, useState } from 'react';
import { api } from '../api/client';
import type { WorkflowVersion } from '../api/types';
import { formatTime, useLanguage, useT } from '../i18n';
import { diffWorkflows, isEmptyDiff, type WorkflowDiff } from '../lib/diff';
import type { WorkflowDoc } from '../lib/workflow';
import { currentDoc, useEditor } from '../store/editor';
import { Dialog } from './Dialog';

function DiffView({ diff }: { diff: WorkflowDiff }) {
  const t = useT();
  if (isEmptyDiff(diff)) return <p data-testid="diff-empty">{t('diff.none')}</p>;
  const rows: [string, string[]][] = [
    [t('diff.nodesAdded'), diff.nodesAdded],
    [t('diff.nodesRemoved'), diff.nodesRemoved],
    [t('diff.nodesChanged'), diff.nodesChanged.map((c) => `${c.id} (${c.fields.join(', ')})`)],
    [t('diff.edgesAdded'), diff.edgesAdded],
    [t('diff.edgesRemoved'), diff.edgesRemoved],
    [t('diff.edgesChanged'), diff.edgesChanged],
    [t('diff.settingsChanged'), diff.settingsChanged],
  ];
  return (
    <dl className="diff" data-testid="diff">
      {rows.filter(([, list]) => list.length).map(([label, list]) => (
        <div key={label}><dt>{label}</dt><dd>{list.join(' · ')}</dd></div>
      ))}
    </dl>
  );
}

export function VersionsPanel() {
  const t = useT();
  const lang = useLanguage((st) => st.lang);
  const workflowId = useEditor((s) => s.workflowId);
  const published = useEditor((s) => s.publishedVersion);
  const [versions, setVersions] = useState<WorkflowVersion[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [diff, setDiff] = useState<{ version: number; diff: WorkflowDiff } | null>(null);

  const refresh = useCallback(() => {
    if (!workflowId) return;
    api.versions(workflowId).then((r) => { setVersions(r.versions); setError(null); }, (e: Error) => setError(e.message));
  }, [workflowId]);
  useEffect(refresh, [refresh, published]);

  const showDiff = async (version: number) => {
    if (!workflowId) return;
    try {
      const doc = await api.exportWorkflow(workflowId, version);
      setDiff({ version, diff: diffWorkflows(doc as WorkflowDoc, currentDoc()) });
    } catch (e) {
      setError((e as Error).message);
    }
  };

  const loadIntoDraft = async (version: number) => {
    if (!workflowId) return;
    try {
      useEditor.getState().replaceDocument(await api.exportWorkflow(workflowId, version) as WorkflowDoc);
      useEditor.setState({ message: t('versions.loaded', { version }) });
    } catch (e) {
      setError((e as Error).message);
    }
  };

  const restore = async (version: number) => {
    if (!workflowId) return;
    try {
      const made = await api.rollback(workflowId, version);
      useEditor.setState({ publishedVersion: made.version, message: t('versions.restored', { version, newVersion: made.version }) });
      refresh();
    } catch (e) {
      setError((e as Error).message);
    }
  };

  return (
    <div className="versions" data-testid="versions-panel">
      {error && <div className="error" role="alert">{error}</div>}
      {versions?.length === 0 && <p className="muted">{t('versions.empty')}</p>}
      <ul>
        {[...(versions ?? [])].reverse().map((v) => (
          <li key={v.version} data-testid={`version-${v.version}`}>
            <div>
              <strong>v{v.version}</strong>{v.published && <span className="badge ok"> {t('versions.current')}</span>}{' '}
              <span className="muted">{formatTime(v.created_at, lang)}</span>
            </div>
            {v.note && <div className="note-text">{v.note}</div>}
            <div className="row">
              <button type="button" data-testid={`version-diff-${v.version}`} onClick={() => void showDiff(v.version)}>{t('versions.diff')}</button>
              <button type="button" data-testid={`version-load-${v.version}`} onClick={() => void loadIntoDraft(v.version)}>
                {t('versions.load')}</button>
              {!v.published && <button type="button" data-testid={`version-restore-${v.version}`}
                onClick={() => void restore(v.version)}>{t('versions.restore')}</button>}
            </div>
          </li>
        ))}
      </ul>
      {diff && (
        <Dialog title={t('diff.title', { version: diff.version })} onClose={() => setDiff(null)} testId="diff-dialog">
          <DiffView diff={diff.diff} />
        </Dialog>
      )}
    </div>
  );
}
