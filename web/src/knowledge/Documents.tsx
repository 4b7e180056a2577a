/**
 * A dataset's documents: upload files (the file chooser or a drop, several at once;
 * each file's fate shown on its own row: uploading, queued, parsing, embedding with
 * chunks done of total, ready, or failed / refused with the server's reason while the
 * others go on), add a text, and per document its status, size, chunk count, the chunk
 * preview, re-index and delete. Ingestion is followed over the dataset's progress
 * stream (`GET /v1/datasets/{id}/events`) while any document is unfinished.
 */
import { useCallback, useEffect, useMemo, useRef, useState, type DragEvent, type FormEvent } from 'react';
import { useT } from '../i18n';
import { streamFrames } from '../run/sse';
import { kbApi, type DocumentOut } from './api';
import { ChunkPreview } from './ChunkPreview';
import {
  afterUpload, applyProgress, documentRows, finished, formatSize, mergeDocuments, uploadOutcomes,
  isProgress, type DocumentRow, type LocalFile,
} from './documents';

const ACCEPT = '.txt,.md,.markdown,.html,.htm,.pdf,.docx,.csv,.jsonl';
/** Documents one progress stream may name (the route's limit). */
const MAX_FOLLOWED = 100;
let batches = 0;

/** Follows the unfinished documents' progress into `setDocuments`; `onSettled` when the
 * stream ends (every one ready or failed), after which the list is read again. */
function useProgress(datasetId: string, documents: DocumentOut[] | null,
  setDocuments: (f: (d: DocumentOut[]) => DocumentOut[]) => void, onSettled: () => void) {
  const pending = useMemo(() => (documents ?? []).filter((d) => !finished(d.status)).map((d) => d.id).sort().join(','),
    [documents]);
  const [round, setRound] = useState(0);
  useEffect(() => {
    if (!pending) return undefined;
    const controller = new AbortController();
    // the route names at most MAX_FOLLOWED documents; more are followed as the whole dataset
    const ids = pending.split(',');
    const query = new URLSearchParams(ids.length <= MAX_FOLLOWED ? ids.map((id) => ['document_id', id]) : []);
    void (async () => {
      let failed = false;
      try {
        for await (const frame of streamFrames('GET', `/v1/datasets/${encodeURIComponent(datasetId)}/events?${query}`,
          undefined, controller.signal)) {
          const progress = frame.data;
          if (frame.event === 'progress' && isProgress(progress)) setDocuments((d) => applyProgress(d, progress));
          if (frame.event === 'error') failed = true;
        }
      } catch {
        failed = true;
      }
      if (controller.signal.aborted) return;
      // a broken stream is followed again a moment later (what is unfinished then)
      if (failed) await new Promise((r) => setTimeout(r, 1000));
      if (!controller.signal.aborted) {
        onSettled();
        setRound((n) => n + 1);
      }
    })();
    return () => controller.abort();
  }, [datasetId, pending, round, setDocuments, onSettled]);
}

function StatusBadge({ row }: { row: DocumentRow }) {
  const t = useT();
  const progress = row.status === 'embedding' && row.chunkCount
    ? ` ${row.chunksDone}/${row.chunkCount}` : '';
  const failed = row.status === 'failed' || row.status === 'rejected';
  return (
    <span className={`badge doc-${row.status}${failed ? ' error' : row.status === 'ready' ? ' ok' : ''}`}
      data-testid="document-status">{t(`knowledge.status.${row.status}` as 'knowledge.status.ready')}{progress}</span>
  );
}

function AddText({ datasetId, onAdded }: { datasetId: string; onAdded: (d: DocumentOut[]) => void }) {
  const t = useT();
  const [name, setName] = useState('');
  const [text, setText] = useState('');
  const [error, setError] = useState<string | null>(null);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    try {
      const result = await kbApi.addText(datasetId, name.trim(), text);
      onAdded(uploadOutcomes([name], result).kept);
      setName('');
      setText('');
      setError(null);
    } catch (err) {
      setError((err as Error).message);
    }
  };
  return (
    <details className="add-text" data-testid="add-text">
      <summary>{t('knowledge.docs.addText')}</summary>
      <form onSubmit={submit}>
        <input data-testid="add-text-name" value={name} placeholder={t('knowledge.docs.textName')}
          onChange={(e) => setName(e.target.value)} />
        <textarea data-testid="add-text-body" rows={5} value={text} placeholder={t('knowledge.docs.textBody')}
          onChange={(e) => setText(e.target.value)} />
        {error && <div className="error" role="alert">{error}</div>}
        <button type="submit" data-testid="add-text-submit" disabled={!name.trim() || !text.trim()}>{t('common.add')}</button>
      </form>
    </details>
  );
}

function DocumentActions({ datasetId, row, onPreview, onChanged }: { datasetId: string; row: DocumentRow;
  onPreview: () => void; onChanged: () => void }) {
  const t = useT();
  const [confirming, setConfirming] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const act = (call: () => Promise<unknown>) => () => {
    call().then(onChanged, (e: Error) => setError(e.message));
  };
  if (!row.documentId) return null;
  const id = row.documentId;
  return (
    <span className="row">
      <button type="button" className="small" data-testid="document-preview" disabled={!row.chunkCount}
        onClick={onPreview}>{t('knowledge.docs.preview')}</button>
      <button type="button" className="small" data-testid="document-reindex" disabled={!finished(row.status)}
        onClick={act(() => kbApi.reindex(datasetId, id))}>{t('knowledge.docs.reindex')}</button>
      {confirming
        ? <button type="button" className="small danger" data-testid="document-delete-confirm"
          onClick={act(() => kbApi.removeDocument(datasetId, id))}>{t('knowledge.docs.confirmDelete')}</button>
        : <button type="button" className="small" data-testid="document-delete" onClick={() => setConfirming(true)}>
          {t('common.delete')}</button>}
      {error && <span className="error small">{error}</span>}
    </span>
  );
}

export function Documents({ datasetId, onChanged }: { datasetId: string; onChanged: () => void }) {
  const t = useT();
  const [documents, setDocuments] = useState<DocumentOut[] | null>(null);
  const [local, setLocal] = useState<LocalFile[]>([]);
  const [error, setError] = useState<string | null>(null);
  const [dragging, setDragging] = useState(false);
  const [preview, setPreview] = useState<DocumentRow | null>(null);
  const input = useRef<HTMLInputElement>(null);

  const reload = useCallback(() => {
    kbApi.documents(datasetId).then((r) => { setDocuments(r.documents); setError(null); },
      (e: Error) => setError(e.message));
    onChanged();
  }, [datasetId, onChanged]);
  useEffect(() => { reload(); }, [reload]);
  const update = useCallback((f: (d: DocumentOut[]) => DocumentOut[]) => setDocuments((d) => f(d ?? [])), []);
  useProgress(datasetId, documents, update, reload);

  const send = async (files: File[]) => {
    if (!files.length) return;
    batches += 1;
    const batch = `upload-${batches}`;
    const sizes = Object.fromEntries(files.map((f) => [f.name, f.size]));
    setLocal((l) => [...l, ...files.map((f, i) => ({ key: `${batch}/${i}/${f.name}`, name: f.name, size: f.size,
      state: 'uploading' as const }))]);
    let answer;
    try {
      answer = await kbApi.upload(datasetId, files);
    } catch (e) {
      answer = e as Error;
    }
    const outcome = uploadOutcomes(files.map((f) => f.name), answer);
    update((d) => mergeDocuments(d, outcome.kept));
    setLocal((l) => afterUpload(l, batch, outcome, sizes));
    onChanged();
  };
  const drop = (e: DragEvent) => {
    e.preventDefault();
    setDragging(false);
    void send([...e.dataTransfer.files]);
  };
  const rows = documentRows(documents ?? [], local);

  return (
    <section className="documents" data-testid="documents">
      <div className={`upload-zone${dragging ? ' dragging' : ''}`} data-testid="upload-zone"
        onDragOver={(e) => { e.preventDefault(); setDragging(true); }} onDragLeave={() => setDragging(false)} onDrop={drop}>
        <p>{t('knowledge.docs.drop')}</p>
        <button type="button" className="primary" data-testid="document-choose" onClick={() => input.current?.click()}>
          {t('knowledge.docs.choose')}</button>
        <input ref={input} type="file" multiple accept={ACCEPT} hidden data-testid="document-file-input"
          onChange={(e) => { void send([...(e.target.files ?? [])]); e.target.value = ''; }} />
        <div className="field-help">{t('knowledge.docs.formats')}</div>
      </div>
      <AddText datasetId={datasetId} onAdded={(kept) => { update((d) => mergeDocuments(d, kept)); onChanged(); }} />
      {error && <div className="error" role="alert">{error}</div>}
      {documents === null && !error && <p className="muted">{t('common.loading')}</p>}
      {documents !== null && rows.length === 0 && <p className="muted">{t('knowledge.docs.empty')}</p>}
      {rows.length > 0 && (
        <table className="document-table" data-testid="document-table">
          <thead><tr>
            <th>{t('knowledge.docs.name')}</th><th>{t('knowledge.docs.status')}</th><th>{t('knowledge.docs.size')}</th>
            <th>{t('knowledge.docs.chunks')}</th><th />
          </tr></thead>
          <tbody>
            {rows.map((row) => (
              <tr key={row.key} data-testid={`document-row-${row.name}`} data-status={row.status}>
                <td>{row.name}</td>
                <td><StatusBadge row={row} />
                  {row.error && <div className="error small" data-testid="document-error">{row.error}</div>}</td>
                <td>{formatSize(row.size)}</td>
                <td data-testid="document-chunks">{row.chunkCount}</td>
                <td><DocumentActions datasetId={datasetId} row={row} onPreview={() => setPreview(row)}
                  onChanged={reload} /></td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {preview?.documentId && <ChunkPreview datasetId={datasetId} documentId={preview.documentId} name={preview.name}
        onClose={() => setPreview(null)} />}
    </section>
  );
}
