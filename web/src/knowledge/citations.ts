/**
 * Pure helpers of the knowledge parts of the editor (unit-tested): the dataset picker's
 * options, the citations of a chat message, and the chunks a retrieval node found as
 * the trace shows them.
 */
import type { Citation } from '../run/events';
import type { Dataset } from './api';

export interface PickerOption {
  id: string;
  name: string;
  /** Secondary text: the id and whether the dataset searches by meaning or full text. */
  detail: string;
  picked: boolean;
  /** Picked, but the tenant has no dataset with this id. */
  missing: boolean;
}

/** The tenant's datasets by name, then picked ids the tenant has no dataset for. */
export function pickerOptions(datasets: Dataset[], picked: readonly string[]): PickerOption[] {
  const chosen = new Set(picked);
  const known = [...datasets].sort((a, b) => a.name.localeCompare(b.name) || a.id.localeCompare(b.id))
    .map((d) => ({ id: d.id, name: d.name, detail: d.embedding_model ? `${d.id} · ${d.embedding_model}` : d.id,
      picked: chosen.has(d.id), missing: false }));
  const ids = new Set(datasets.map((d) => d.id));
  const missing = [...new Set(picked)].filter((id) => !ids.has(id))
    .map((id) => ({ id, name: id, detail: '', picked: true, missing: true }));
  return [...known, ...missing];
}

/** The citations of a stored chat message (its `citation` parts), each once. */
export function messageCitations(parts: { type: string; data?: Record<string, unknown> }[]): Citation[] {
  const out: Citation[] = [];
  for (const p of parts) {
    if (p.type !== 'citation' || !p.data) continue;
    const c = citationOf(p.data);
    if (c && !out.some((k) => k.citation_id === c.citation_id && k.chunk_id === c.chunk_id)) out.push(c);
  }
  return out;
}

/** A citation from a `QuotePiece` or a retrieval node's chunk object; null when it has no id. */
export function citationOf(data: Record<string, unknown>): Citation | null {
  if (data.citation_id === undefined || data.citation_id === null || data.citation_id === '') return null;
  return {
    citation_id: String(data.citation_id), source_name: String(data.source_name ?? data.document_id ?? ''),
    chunk_id: typeof data.chunk_id === 'string' ? data.chunk_id : undefined,
    dataset_id: typeof data.dataset_id === 'string' ? data.dataset_id : undefined,
    text: typeof data.text === 'string' ? data.text : undefined,
    score: typeof data.score === 'number' ? data.score : undefined,
    heading_path: Array.isArray(data.heading_path) ? data.heading_path.map(String) : undefined,
  };
}

/** The `chunks` output of a knowledge retrieval node run as citations (bad items skipped). */
export function retrievedChunks(outputs: Record<string, unknown> | null | undefined): Citation[] {
  const chunks = outputs?.chunks;
  if (!Array.isArray(chunks)) return [];
  return chunks.flatMap((c) => (c && typeof c === 'object' ? [citationOf(c as Record<string, unknown>)] : []))
    .filter((c): c is Citation => c !== null);
}
