/** Published versions: which one runs, a comparison of any version with the draft or
 * another version ({@link DiffDialog}), and restore (publish that version again, as a
 * new version), after a confirmation that says it goes live at once. */
import { useCallback, useEffect, useState } from 'react';
import { api } from '../api/client';
import type { WorkflowVersion } from '../api/types';
import { formatTime, useLanguage, useT } from '../i18n';
import type { WorkflowDoc } from '../lib/workflow';
import { useEditor } from '../store/editor';
import { Dialog } from './Dialog';
import { DiffDialog } from './DiffDialog';

export function VersionsPanel() {
  const t = useT();
  const lang = useLanguage((st) => st.lang);
  const workflowId = useEditor((s) => s.workflowId);
  const published = useEditor((s) => s.publishedVersion);
  const [versions, setVersions] = useState<WorkflowVersion[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [compare, setCompare] = useState<number | null>(null);
  const [restoring, setRestoring] = useState<number | null>(null);

  const refresh = useCallback(() => {
    if (!workflowId) return;
    api.versions(workflowId).then((r) => { setVersions(r.versions); setError(null); }, (e: Error) => setError(e.message));
  }, [workflowId]);
  useEffect(refresh, [refresh, published]);

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
    setRestoring(null);
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
    <>
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
                <button type="button" data-testid={`version-diff-${v.version}`} onClick={() => setCompare(v.version)}>{t('versions.diff')}</button>
                <button type="button" data-testid={`version-load-${v.version}`} onClick={() => void loadIntoDraft(v.version)}>
                  {t('versions.load')}</button>
                {!v.published && <button type="button" data-testid={`version-restore-${v.version}`}
                  onClick={() => setRestoring(v.version)}>{t('versions.restore')}</button>}
              </div>
            </li>
          ))}
        </ul>
      </div>
      {restoring !== null && (
        <Dialog title={t('versions.restoreTitle', { version: restoring })} testId="restore-dialog" onClose={() => setRestoring(null)}
          footer={<>
            <button type="button" data-testid="restore-cancel" onClick={() => setRestoring(null)}>{t('common.cancel')}</button>
            <button type="button" className="primary" data-testid="restore-confirm"
              onClick={() => void restore(restoring)}>{t('versions.restoreConfirm')}</button>
          </>}>
          <p data-testid="restore-warning">{t('versions.restoreWarning', { version: restoring, current: published ?? '—' })}</p>
        </Dialog>
      )}
      {compare !== null && workflowId && (
        <DiffDialog workflowId={workflowId} versions={versions ?? []} from={compare} onClose={() => setCompare(null)} />
      )}
    </>
  );
}
