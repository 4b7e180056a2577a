/** Shown when autosave got a 409: another tab saved a newer draft. Nothing is
 * overwritten until the person chooses: load theirs, or save theirs over with mine. */
import { useT } from '../i18n';
import { useEditor } from '../store/editor';
import { reloadDraft, saveNow } from '../store/persistence';
import { Dialog } from './Dialog';

export function ConflictDialog() {
  const t = useT();
  const status = useEditor((s) => s.saveStatus);
  const version = useEditor((s) => s.conflictVersion);
  if (status !== 'conflict') return null;
  const close = () => useEditor.setState({ saveStatus: 'dirty' });
  return (
    <Dialog title={t('conflict.title')} onClose={close} testId="conflict-dialog"
      footer={<>
        <button type="button" data-testid="conflict-reload" onClick={() => void reloadDraft()}>{t('conflict.reload')}</button>
        <button type="button" data-testid="conflict-overwrite" onClick={() => void saveNow({ force: true })}>{t('conflict.overwrite')}</button>
      </>}>
      <p>{t('conflict.body', { version: version ?? '?' })}</p>
    </Dialog>
  );
}
