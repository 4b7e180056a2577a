/** The tenant's workflows: open one, create one, or drop a file to import it. */
import { useEffect, useState, type FormEvent } from 'react';
import { api } from '../api/client';
import type { WorkflowOut } from '../api/types';
import { navigate } from '../route';
import { useT } from '../i18n';
import { newWorkflow } from '../lib/workflow';
import { ImportDropZone } from './ImportDialog';

export function WorkflowList() {
  const t = useT();
  const [items, setItems] = useState<WorkflowOut[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [id, setId] = useState('');

  useEffect(() => {
    api.listWorkflows().then((r) => setItems(r.workflows), (e: Error) => setError(e.message));
  }, []);

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

  return (
    <ImportDropZone className="workflow-list" onOpen={navigate}>
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
        {items?.map((w) => (
          <li key={w.id}>
            <a href={`#/w/${encodeURIComponent(w.id)}`} data-testid={`workflow-${w.id}`}>{w.name || w.id}</a>
            <span className="muted"> {w.id} · {w.published_version ? t('workflows.published', { version: w.published_version }) : t('workflows.unpublished')}</span>
          </li>
        ))}
      </ul>
      <p className="muted">{t('import.drop')}</p>
    </ImportDropZone>
  );
}
