/** The tenant's workflows: open, rename or delete one (after a confirmation), create
 * one, or import a file (dropped on the list or chosen with the file dialog). */
import { useCallback, useEffect, useState, type FormEvent } from 'react';
import { api } from '../api/client';
import type { WorkflowOut } from '../api/types';
import { navigate } from '../route';
import { useT } from '../i18n';
import { newWorkflow } from '../lib/workflow';
import { Dialog } from './Dialog';
import { ImportDropZone } from './ImportDialog';

/** Renames workflow `id` (its display name; the id stays, since runs and keys name it). */
async function renameWorkflow(id: string, name: string): Promise<void> {
  const detail = await api.getWorkflow(id);
  await api.saveDraft(id, { ...detail.draft, name } as Parameters<typeof api.saveDraft>[1], detail.draft_version);
}

function Row({ w, onChanged, onDelete }: { w: WorkflowOut; onChanged: () => void; onDelete: () => void }) {
  const t = useT();
  const [name, setName] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const save = async () => {
    const next = (name ?? '').trim();
    setName(null);
    if (!next || next === (w.name || w.id)) return;
    try {
      await renameWorkflow(w.id, next);
      setError(null);
      onChanged();
    } catch (e) {
      setError((e as Error).message);
    }
  };
  return (
    <li data-testid={`workflow-row-${w.id}`}>
      {name === null ? (
        <a href={`#/w/${encodeURIComponent(w.id)}`} data-testid={`workflow-${w.id}`}>{w.name || w.id}</a>
      ) : (
        <input autoFocus data-testid={`workflow-name-${w.id}`} value={name} aria-label={t('workflows.rename')}
          onChange={(e) => setName(e.target.value)} onBlur={() => void save()}
          onKeyDown={(e) => {
            if (e.key === 'Enter') void save();
            if (e.key === 'Escape') setName(null);
          }} />
      )}
      <span className="muted"> {w.id} · {w.published_version ? t('workflows.published', { version: w.published_version }) : t('workflows.unpublished')}</span>
      <span className="row-actions">
        <button type="button" className="link small" data-testid={`workflow-rename-${w.id}`}
          onClick={() => setName(w.name || w.id)}>{t('workflows.rename')}</button>
        <button type="button" className="link small danger" data-testid={`workflow-delete-${w.id}`}
          onClick={onDelete}>{t('common.delete')}</button>
      </span>
      {error && <div className="error" role="alert">{error}</div>}
    </li>
  );
}

export function WorkflowList() {
  const t = useT();
  const [items, setItems] = useState<WorkflowOut[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [id, setId] = useState('');
  const [deleting, setDeleting] = useState<WorkflowOut | null>(null);

  const load = useCallback(() => {
    api.listWorkflows().then((r) => setItems(r.workflows), (e: Error) => setError(e.message));
  }, []);
  useEffect(load, [load]);

  const create = async (e: FormEvent) => {
    e.preventDefault();
    setError(null);
    try {
      const saved = await api.createWorkflow(newWorkflow(id.trim(), id.trim()));
      navigate(saved.id);
    } catch (err) {
      setError((err as Error).message);
    }
  };

  const remove = async (w: WorkflowOut) => {
    setDeleting(null);
    try {
      await api.deleteWorkflow(w.id);
      load();
    } catch (err) {
      setError((err as Error).message);
    }
  };

  return (
    <ImportDropZone className="workflow-list" onOpen={navigate} chooser>
      <h1>{t('workflows.title')}</h1>
      <form className="row" onSubmit={create}>
        <input data-testid="new-workflow-id" value={id} placeholder={t('workflows.newId')} pattern="[A-Za-z0-9_\-]+"
          aria-describedby="new-workflow-hint" title={t('workflows.newIdHint')} onChange={(e) => setId(e.target.value)} />
        <button type="submit" data-testid="new-workflow" disabled={!/^[A-Za-z0-9_-]+$/.test(id.trim())}>{t('workflows.create')}</button>
      </form>
      <div id="new-workflow-hint" className="field-help" data-testid="new-workflow-hint">{t('workflows.newIdHint')}</div>
      {error && <div className="error" role="alert">{error}</div>}
      {items === null && !error && <p className="muted">{t('common.loading')}</p>}
      {items?.length === 0 && <p className="muted">{t('workflows.empty')}</p>}
      <ul className="workflows" data-testid="workflow-list">
        {items?.map((w) => <Row key={w.id} w={w} onChanged={load} onDelete={() => setDeleting(w)} />)}
      </ul>
      <p className="muted">{t('import.drop')}</p>
      {deleting && (
        <Dialog title={t('workflows.deleteTitle')} testId="workflow-delete-dialog" onClose={() => setDeleting(null)}
          footer={<>
            <button type="button" data-testid="workflow-delete-cancel" onClick={() => setDeleting(null)}>{t('common.cancel')}</button>
            <button type="button" className="danger" data-testid="workflow-delete-confirm"
              onClick={() => void remove(deleting)}>{t('common.delete')}</button>
          </>}>
          <p>{t('workflows.deleteConfirm', { name: deleting.name || deleting.id, id: deleting.id })}</p>
        </Dialog>
      )}
    </ImportDropZone>
  );
}
