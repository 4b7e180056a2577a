/** Publishing the draft with a note (the draft is saved first; the server compiles it). */
import { useState } from 'react';
import { api, ApiError } from '../api/client';
import { useT } from '../i18n';
import { problemText } from '../lib/errors';
import { useEditor } from '../store/editor';
import { saveNow } from '../store/persistence';
import { Dialog } from './Dialog';

export function PublishDialog({ onClose }: { onClose: () => void }) {
  const t = useT();
  const [note, setNote] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [problems, setProblems] = useState<string[]>([]);

  const publish = async () => {
    const id = useEditor.getState().workflowId;
    if (!id) return;
    setBusy(true);
    setError(null);
    try {
      await saveNow();
      if (useEditor.getState().saveStatus !== 'saved') throw new Error(useEditor.getState().saveError ?? t('toolbar.unsaved'));
      const version = await api.publish(id, note);
      useEditor.setState({ publishedVersion: version.version, message: t('publish.done', { version: version.version }) });
      onClose();
    } catch (e) {
      const listed = e instanceof ApiError && Array.isArray(e.problems) && e.problems.length > 0;
      // the problems are listed below the message, one a line
      setError(listed ? (e as ApiError).summary : (e as Error).message);
      if (listed) setProblems((e as ApiError).problems!.map(problemText));
    } finally {
      setBusy(false);
    }
  };

  return (
    <Dialog title={t('publish.title')} onClose={onClose} testId="publish-dialog"
      footer={<>
        <button type="button" onClick={onClose}>{t('common.cancel')}</button>
        <button type="button" className="primary" data-testid="publish-submit" disabled={busy}
          onClick={() => void publish()}>{t('publish.submit')}</button>
      </>}>
      <label htmlFor="publish-note">{t('publish.note')}</label>
      <textarea id="publish-note" data-testid="publish-note" value={note} maxLength={2000} onChange={(e) => setNote(e.target.value)} />
      {error && <div className="error" role="alert">{error}</div>}
      {problems.length > 0 && <ul className="report">{problems.map((p, i) => <li key={i}>{p}</li>)}</ul>}
    </Dialog>
  );
}
