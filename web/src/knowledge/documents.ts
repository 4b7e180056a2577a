/**
 * Pure bookkeeping of a dataset page's document list (no React, no fetch; unit-tested):
 * the server's documents merged with the files of uploads in flight (`uploading`) and
 * the files an upload refused (`rejected`, with the server's reason), ingestion progress
 * events folded in, and what one upload's answer (or its error) says about each file.
 */
import { ApiError } from '../api/client';
import type { DocumentOut, DocumentStatus, DocumentUploadItem, DocumentUploadResult } from './api';

/** A file of the page's uploads that is not (yet) a document of the dataset. */
export interface LocalFile {
  /** Unique within the page: the upload's number and the file's name. */
  key: string;
  name: string;
  size: number;
  state: 'uploading' | 'rejected';
  /** Why the server refused it (the upload's `error.message`). */
  reason?: string;
}

/** One row of the document list: a stored document, or a local file. */
export interface DocumentRow {
  key: string;
  name: string;
  size: number;
  status: DocumentStatus | 'uploading' | 'rejected';
  error: string | null;
  chunksDone: number;
  chunkCount: number;
  /** The stored document's id (none for a local file). */
  documentId: string | null;
}

/** A `progress` event of `GET /v1/datasets/{id}/events`. */
export interface DocumentProgress {
  document_id: string;
  source_name?: string;
  status: DocumentStatus;
  chunks_done: number;
  chunk_count: number;
  error?: string | null;
}

/** Whether `data` (a frame of `GET /v1/datasets/{id}/events`) is a `progress` event. */
export function isProgress(data: unknown): data is DocumentProgress {
  return typeof data === 'object' && data !== null && 'document_id' in data && typeof data.document_id === 'string'
    && 'status' in data && typeof data.status === 'string';
}

/** What one upload did: the documents it kept, the files it refused with the reason. */
export interface UploadOutcome {
  kept: DocumentOut[];
  rejected: { name: string; reason: string }[];
}

export const finished = (status: string): boolean => status === 'ready' || status === 'failed';

/** The documents (oldest first), then the local files. */
export function documentRows(documents: DocumentOut[], local: LocalFile[]): DocumentRow[] {
  const rows: DocumentRow[] = documents.map((d) => ({
    key: d.id, name: d.source_name, size: d.size_bytes ?? 0, status: d.status, error: d.error ?? null,
    chunksDone: d.chunks_done ?? 0, chunkCount: d.chunk_count ?? 0, documentId: d.id,
  }));
  for (const f of local) {
    rows.push({ key: f.key, name: f.name, size: f.size, status: f.state, error: f.reason ?? null, chunksDone: 0,
      chunkCount: 0, documentId: null });
  }
  return rows;
}

/** The local files once upload `batch` answered: its `uploading` files are gone (kept
 * ones are documents now), each refused file is listed with its reason, and an earlier
 * refusal of a name this upload kept is dropped (the file was sent again, fixed). */
export function afterUpload(local: LocalFile[], batch: string, outcome: UploadOutcome,
  sizes: Record<string, number>): LocalFile[] {
  const keptNames = new Set(outcome.kept.map((d) => d.source_name));
  const left = local.filter((f) => !f.key.startsWith(`${batch}/`) && !(f.state === 'rejected' && keptNames.has(f.name)));
  return [...left, ...outcome.rejected.map((r, i) => ({ key: `${batch}/${i}/${r.name}`, name: r.name,
    size: sizes[r.name] ?? 0, state: 'rejected' as const, reason: r.reason }))];
}

/** `documents` with `progress` applied to its document (unknown documents: unchanged). */
export function applyProgress(documents: DocumentOut[], progress: DocumentProgress): DocumentOut[] {
  return documents.map((d) => (d.id !== progress.document_id ? d : {
    ...d, status: progress.status, chunks_done: progress.chunks_done, chunk_count: progress.chunk_count,
    error: progress.error ?? null,
  }));
}

/** What became of each file of one upload: the documents kept (created or unchanged)
 * and the files refused with their reason, from the 202 answer or, when every file was
 * refused, from the error's `problems`. Any other error refuses every file with its message. */
export function uploadOutcomes(names: string[], answer: DocumentUploadResult | ApiError | Error): UploadOutcome {
  if (answer instanceof Error) {
    const items = answer instanceof ApiError && Array.isArray(answer.problems)
      ? (answer.problems as Partial<DocumentUploadItem>[]).filter((p) => p && typeof p === 'object' && p.source_name)
      : [];
    if (items.length) {
      return { kept: [], rejected: items.map((i) => ({ name: String(i.source_name),
        reason: i.error?.message ?? answer.message })) };
    }
    const reason = answer instanceof ApiError ? answer.summary : answer.message;
    return { kept: [], rejected: names.map((name) => ({ name, reason })) };
  }
  const kept: DocumentOut[] = [];
  const rejected: { name: string; reason: string }[] = [];
  for (const item of answer.documents) {
    if (item.outcome === 'rejected') rejected.push({ name: item.source_name, reason: item.error?.message ?? '' });
    else if (item.document) kept.push(item.document);
  }
  return { kept, rejected };
}

/** `known` with `kept` put in: a document already listed is replaced, a new one appended. */
export function mergeDocuments(known: DocumentOut[], kept: DocumentOut[]): DocumentOut[] {
  const byId = new Map(kept.map((d) => [d.id, d]));
  const out = known.map((d) => byId.get(d.id) ?? d);
  for (const d of kept) if (!known.some((k) => k.id === d.id)) out.push(d);
  return out;
}

/** A byte count as people read it: `512 B`, `1.5 KB`, `2.0 MB`. */
export function formatSize(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

/** The page of chunk preview `page` (0-based) of `total` chunks, `size` a page: the
 * offset to ask for and the 1-based range shown (`from` 0 when there are none). */
export function chunkPage(page: number, size: number, total: number): { offset: number; from: number; to: number;
  pages: number } {
  const pages = Math.max(1, Math.ceil(total / size));
  const p = Math.min(Math.max(0, page), pages - 1);
  const offset = p * size;
  return { offset, from: total ? offset + 1 : 0, to: Math.min(total, offset + size), pages };
}
