/** One dataset: its settings at a glance (edit, delete), its documents, and hit testing. */
import { useCallback, useEffect, useState } from 'react';
import { useT } from '../i18n';
import { knowledgeHref, openDataset } from '../route';
import { kbApi, type Dataset } from './api';
import { DatasetForm } from './DatasetForm';
import { DeleteDataset } from './DatasetList';
import { Documents } from './Documents';
import { HitTesting } from './HitTesting';
import { useDatasets } from './store';

export function DatasetPage({ datasetId }: { datasetId: string }) {
  const t = useT();
  const [dataset, setDataset] = useState<Dataset | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [tab, setTab] = useState<'documents' | 'hits'>('documents');
  const [editing, setEditing] = useState(false);
  const [deleting, setDeleting] = useState(false);
  const loadList = useDatasets((s) => s.load);
  const reload = useCallback(() => {
    kbApi.get(datasetId).then((d) => { setDataset(d); setError(null); }, (e: Error) => setError(e.message));
  }, [datasetId]);
  useEffect(() => { reload(); }, [reload]);

  return (
    <div className="knowledge-page" data-testid="dataset-page" data-dataset={datasetId}>
      <a href={knowledgeHref()} className="small" data-testid="dataset-back">← {t('knowledge.title')}</a>
      {error && <div className="error" role="alert">{error}</div>}
      {dataset && (
        <>
          <div className="row">
            <h1 data-testid="dataset-title">{dataset.name}</h1>
            <span className="muted small">{dataset.id}</span>
            <span className="spacer" />
            <button type="button" data-testid="dataset-edit" onClick={() => setEditing(true)}>{t('knowledge.edit')}</button>
            <button type="button" data-testid="dataset-delete" onClick={() => setDeleting(true)}>{t('common.delete')}</button>
          </div>
          {dataset.description && <p>{dataset.description}</p>}
          <p className="muted small" data-testid="dataset-summary">
            {dataset.embedding_model ? t('knowledge.model', { model: dataset.embedding_model }) : t('knowledge.fullTextOnly')}
            {dataset.building_index ? ` · ${t('knowledge.building', { model: dataset.building_index.embedding_model })}` : ''}
            {' · '}{t('knowledge.chunking', { size: dataset.chunking.chunk_tokens ?? 512, overlap: dataset.chunking.overlap_tokens ?? 64 })}
            {' · '}{t('knowledge.counts', { documents: dataset.document_count ?? 0, chunks: dataset.chunk_count ?? 0 })}
          </p>
          <div className="tabs knowledge-tabs" role="tablist">
            <button type="button" role="tab" aria-selected={tab === 'documents'} data-testid="dataset-tab-documents"
              onClick={() => setTab('documents')}>{t('knowledge.tab.documents')}</button>
            <button type="button" role="tab" aria-selected={tab === 'hits'} data-testid="dataset-tab-hits"
              onClick={() => setTab('hits')}>{t('knowledge.tab.hits')}</button>
          </div>
          {/* the documents stay mounted behind the hit testing tab, so uploads keep being followed */}
          <div hidden={tab !== 'documents'}><Documents datasetId={datasetId} onChanged={reload} /></div>
          {tab === 'hits' && <HitTesting dataset={dataset} />}
          {editing && <DatasetForm dataset={dataset} onClose={() => setEditing(false)}
            onSaved={(saved) => { setEditing(false); setDataset(saved); void loadList(); }} />}
          {deleting && <DeleteDataset dataset={dataset} onClose={() => setDeleting(false)}
            onDeleted={() => { void loadList(); openDataset(null); }} />}
        </>
      )}
    </div>
  );
}
