/**
 * The Knowledge section's home: the tenant's datasets (name, description, embedding
 * model or full-text only, document and chunk counts), each opened, edited or deleted
 * (after a confirmation naming what goes with it), and a new one created.
 */
import { useEffect, useState } from 'react';
import { useT } from '../i18n';
import { Dialog } from '../panels/Dialog';
import { knowledgeHref, openDataset } from '../route';
import { kbApi, type Dataset } from './api';
import { DatasetForm } from './DatasetForm';
import { useDatasets } from './store';

/** Asks before deleting `dataset` with its documents; `onDeleted` after the server did. */
export function DeleteDataset({ dataset, onClose, onDeleted }: { dataset: Dataset; onClose: () => void;
  onDeleted: () => void }) {
  const t = useT();
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const remove = async () => {
    setBusy(true);
    try {
      await kbApi.remove(dataset.id);
      onDeleted();
    } catch (e) {
      setError((e as Error).message);
      setBusy(false);
    }
  };
  return (
    <Dialog title={t('knowledge.delete.title', { name: dataset.name })} onClose={onClose} testId="dataset-delete-dialog"
      footer={<>
        <button type="button" onClick={onClose}>{t('common.cancel')}</button>
        <button type="button" className="danger" data-testid="dataset-delete-confirm" disabled={busy} onClick={() => void remove()}>
          {t('common.delete')}</button>
      </>}>
      <p>{t('knowledge.delete.body', { documents: dataset.document_count ?? 0, chunks: dataset.chunk_count ?? 0 })}</p>
      {error && <div className="error" role="alert">{error}</div>}
    </Dialog>
  );
}

export function DatasetList() {
  const t = useT();
  const { datasets, status, error, load } = useDatasets();
  const [editing, setEditing] = useState<Dataset | 'new' | null>(null);
  const [deleting, setDeleting] = useState<Dataset | null>(null);
  useEffect(() => { void load(); }, [load]);
  return (
    <div className="knowledge-page" data-testid="dataset-list-page">
      <div className="row">
        <h1>{t('knowledge.title')}</h1>
        <span className="spacer" />
        <button type="button" className="primary" data-testid="dataset-new" onClick={() => setEditing('new')}>
          + {t('knowledge.new')}</button>
      </div>
      <p className="muted">{t('knowledge.intro')}</p>
      {error && <div className="error" role="alert">{error}</div>}
      {status === 'loading' && <p className="muted">{t('common.loading')}</p>}
      {status === 'ready' && datasets.length === 0 && <p className="muted" data-testid="dataset-empty">{t('knowledge.empty')}</p>}
      <ul className="dataset-cards" data-testid="dataset-list">
        {datasets.map((d) => (
          <li key={d.id} className="dataset-card" data-testid={`dataset-${d.id}`}>
            <a href={knowledgeHref(d.id)} data-testid={`dataset-open-${d.id}`}><strong>{d.name}</strong></a>
            <span className="muted small"> {d.id}</span>
            {d.description && <div className="dataset-description">{d.description}</div>}
            <div className="muted small">
              {d.embedding_model ? t('knowledge.model', { model: d.embedding_model }) : t('knowledge.fullTextOnly')}
              {' · '}{t('knowledge.counts', { documents: d.document_count ?? 0, chunks: d.chunk_count ?? 0 })}
            </div>
            <div className="row">
              <button type="button" className="small" data-testid={`dataset-edit-${d.id}`} onClick={() => setEditing(d)}>
                {t('knowledge.edit')}</button>
              <button type="button" className="small" data-testid={`dataset-delete-${d.id}`} onClick={() => setDeleting(d)}>
                {t('common.delete')}</button>
            </div>
          </li>
        ))}
      </ul>
      {editing && (
        <DatasetForm dataset={editing === 'new' ? null : editing} onClose={() => setEditing(null)}
          onSaved={(saved) => {
            setEditing(null);
            void load();
            if (editing === 'new') openDataset(saved.id);
          }} />
      )}
      {deleting && <DeleteDataset dataset={deleting} onClose={() => setDeleting(null)}
        onDeleted={() => { setDeleting(null); void load(); }} />}
    </div>
  );
}
