/**
 * Create or edit a dataset: name, description, embedding model (one of the registry's
 * embedding models, or none: full-text search only), and chunking (chunk size and
 * overlap in tokens, split at Markdown headings, parent-child chunks). Changing the
 * model of an existing dataset re-indexes it, which the form says before saving.
 */
import { useState, type FormEvent } from 'react';
import { useT } from '../i18n';
import { useCatalog } from '../store/catalog';
import { Dialog } from '../panels/Dialog';
import { kbApi, type Dataset, type DatasetCreate, type DatasetCreated, type DatasetUpdate } from './api';

export interface Draft {
  name: string;
  description: string;
  model: string;
  chunkTokens: number;
  overlapTokens: number;
  splitHeadings: boolean;
  parentChild: boolean;
  childTokens: number;
}

export function draftOf(d: Dataset | null): Draft {
  return {
    name: d?.name ?? '', description: d?.description ?? '', model: d?.embedding_model ?? '',
    chunkTokens: d?.chunking.chunk_tokens ?? 512, overlapTokens: d?.chunking.overlap_tokens ?? 64,
    splitHeadings: d?.chunking.split_headings ?? true, parentChild: !!d?.chunking.parent_child,
    childTokens: d?.chunking.parent_child?.child_tokens ?? 128,
  };
}

/** The body of `POST /v1/datasets` for `draft`. */
export function datasetBody(draft: Draft): DatasetCreate {
  return {
    name: draft.name.trim(), description: draft.description, embedding_model: draft.model || null,
    chunking: {
      chunk_tokens: draft.chunkTokens, overlap_tokens: draft.overlapTokens, split_headings: draft.splitHeadings,
      parent_child: draft.parentChild ? { child_tokens: draft.childTokens, child_overlap_tokens: 0 } : null,
    },
  };
}

/** The body of `PATCH /v1/datasets/{id}` turning `dataset` into `draft`: the embedding
 * model only when it changed (a new one re-indexes and spends tokens; none clears it). */
export function datasetPatch(dataset: Dataset, draft: Draft): Partial<DatasetUpdate> {
  const { embedding_model: model, ...rest } = datasetBody(draft);
  const before = dataset.embedding_model ?? null;
  if (model === before) return rest;
  return model ? { ...rest, embedding_model: model } : { ...rest, clear_embedding_model: true };
}

export function DatasetForm({ dataset, onClose, onSaved }: { dataset: Dataset | null; onClose: () => void;
  onSaved: (d: Dataset) => void }) {
  const t = useT();
  const models = useCatalog((s) => s.embeddingModels);
  const [draft, setDraft] = useState<Draft>(() => draftOf(dataset));
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  // A dataset made with warnings (a provider key this deployment lacks): the dialog says
  // so before the dataset page opens, since every document added would fail at embedding.
  const [created, setCreated] = useState<DatasetCreated | null>(null);
  const change = (patch: Partial<Draft>) => setDraft((d) => ({ ...d, ...patch }));
  const choices = dataset?.embedding_model && !models.includes(dataset.embedding_model)
    ? [dataset.embedding_model, ...models] : models;
  const reindexes = !!dataset && (dataset.embedding_model ?? '') !== draft.model && !!draft.model;

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      if (dataset) {
        onSaved(await kbApi.update(dataset.id, datasetPatch(dataset, draft)));
        return;
      }
      const made = await kbApi.create(datasetBody(draft));
      if (made.warnings?.length) setCreated(made);
      else onSaved(made);
    } catch (err) {
      setError((err as Error).message);
    } finally {
      setBusy(false);
    }
  };
  const title = dataset ? t('knowledge.form.editTitle', { name: dataset.name }) : t('knowledge.form.createTitle');
  if (created) {
    return (
      <Dialog title={title} onClose={() => onSaved(created)} testId="dataset-form">
        <div className="warning" role="alert" data-testid="dataset-created-warning">
          <p>{t('knowledge.form.createdWithWarnings')}</p>
          <ul>{(created.warnings ?? []).map((w) => <li key={w.code + w.field}>{w.message}</li>)}</ul>
        </div>
        <div className="row end">
          <button type="button" className="primary" data-testid="dataset-created-open" onClick={() => onSaved(created)}>
            {t('knowledge.form.openDataset')}</button>
        </div>
      </Dialog>
    );
  }
  return (
    <Dialog title={title} onClose={onClose} testId="dataset-form">
      <form className="dataset-form" onSubmit={submit}>
        <label>{t('knowledge.form.name')}
          <input data-testid="dataset-name" required value={draft.name} onChange={(e) => change({ name: e.target.value })} /></label>
        <label>{t('knowledge.form.description')}
          <textarea data-testid="dataset-description" rows={2} value={draft.description}
            onChange={(e) => change({ description: e.target.value })} /></label>
        <label>{t('knowledge.form.model')}
          <select data-testid="dataset-model" value={draft.model} onChange={(e) => change({ model: e.target.value })}>
            <option value="">{t('knowledge.form.noModel')}</option>
            {choices.map((m) => <option key={m} value={m}>{m}</option>)}
          </select></label>
        <div className="field-help">{draft.model ? t('knowledge.form.modelHelp') : t('knowledge.form.noModelHelp')}</div>
        {reindexes && <div className="warning small" data-testid="dataset-reindex-warning">{t('knowledge.form.reindex')}</div>}
        <fieldset>
          <legend>{t('knowledge.form.chunking')}</legend>
          <div className="row">
            <label>{t('knowledge.form.chunkTokens')}
              <input data-testid="dataset-chunk-tokens" type="number" min={32} max={8192} value={draft.chunkTokens}
                onChange={(e) => change({ chunkTokens: Number(e.target.value) })} /></label>
            <label>{t('knowledge.form.overlapTokens')}
              <input data-testid="dataset-overlap-tokens" type="number" min={0} max={2048} value={draft.overlapTokens}
                onChange={(e) => change({ overlapTokens: Number(e.target.value) })} /></label>
          </div>
          <label className="check"><input type="checkbox" data-testid="dataset-split-headings" checked={draft.splitHeadings}
            onChange={(e) => change({ splitHeadings: e.target.checked })} /> {t('knowledge.form.splitHeadings')}</label>
          <label className="check"><input type="checkbox" data-testid="dataset-parent-child" checked={draft.parentChild}
            onChange={(e) => change({ parentChild: e.target.checked })} /> {t('knowledge.form.parentChild')}</label>
          {draft.parentChild && (
            <label>{t('knowledge.form.childTokens')}
              <input data-testid="dataset-child-tokens" type="number" min={16} max={4096} value={draft.childTokens}
                onChange={(e) => change({ childTokens: Number(e.target.value) })} /></label>
          )}
          {dataset && <div className="field-help">{t('knowledge.form.chunkingLater')}</div>}
        </fieldset>
        {error && <div className="error" role="alert" data-testid="dataset-form-error">{error}</div>}
        <div className="row end">
          <button type="button" onClick={onClose}>{t('common.cancel')}</button>
          <button type="submit" className="primary" data-testid="dataset-save" disabled={busy || !draft.name.trim()}>
            {dataset ? t('knowledge.form.save') : t('knowledge.form.create')}</button>
        </div>
      </form>
    </Dialog>
  );
}
