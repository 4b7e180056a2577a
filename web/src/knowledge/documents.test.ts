import { describe, expect, it } from 'vitest';
import { ApiError } from '../api/client';
import type { DocumentOut } from './api';
import {
  afterUpload, applyProgress, chunkPage, documentRows, formatSize, mergeDocuments, uploadOutcomes, type LocalFile,
} from './documents';

function doc(id: string, name: string, status: DocumentOut['status'] = 'queued'): DocumentOut {
  return { id, dataset_id: 'ds', source_name: name, content_type: 'txt', content_hash: `h-${id}`, size_bytes: 10, status,
    error: null, chunk_count: 0, chunks_done: 0, metadata: {}, created_at: 0, updated_at: 0 };
}

describe('uploadOutcomes', () => {
  it('test_a_partly_refused_upload_keeps_the_good_files_and_names_each_refusal', () => {
    const answer = { accepted: 1, rejected: 1, documents: [
      { source_name: 'a.txt', outcome: 'created' as const, document: doc('d1', 'a.txt') },
      { source_name: 'empty.txt', outcome: 'rejected' as const, error: { status: 422, reason: 'empty', message: 'empty.txt: the document is empty' } },
    ] };
    const out = uploadOutcomes(['a.txt', 'empty.txt'], answer);
    expect(out.kept.map((d) => d.id)).toEqual(['d1']);
    expect(out.rejected).toEqual([{ name: 'empty.txt', reason: 'empty.txt: the document is empty' }]);
  });

  it('test_an_upload_refused_whole_reads_each_files_reason_from_the_problems', () => {
    const error = new ApiError(422, 'invalid_document', 'no document was kept (2 rejected)', [
      { source_name: 'x.pdf', outcome: 'rejected', error: { status: 422, reason: 'type_mismatch', message: 'x.pdf is not a PDF' } },
      { source_name: 'big.txt', outcome: 'rejected', error: { status: 413, reason: 'too_large', message: 'big.txt is too large' } },
    ]);
    expect(uploadOutcomes(['x.pdf', 'big.txt'], error).rejected).toEqual([
      { name: 'x.pdf', reason: 'x.pdf is not a PDF' }, { name: 'big.txt', reason: 'big.txt is too large' }]);
  });

  it('test_any_other_failure_refuses_every_file_with_the_servers_message', () => {
    const out = uploadOutcomes(['a.txt', 'b.md'], new ApiError(429, 'quota_exceeded', 'tokens per day used up'));
    expect(out).toEqual({ kept: [], rejected: [{ name: 'a.txt', reason: 'tokens per day used up' },
      { name: 'b.md', reason: 'tokens per day used up' }] });
  });
});

describe('afterUpload', () => {
  it('test_the_batchs_uploading_files_give_way_to_its_refusals_and_a_fixed_file_clears_its_old_refusal', () => {
    let local: LocalFile[] = [{ key: 'upload-1/0/a.txt', name: 'a.txt', size: 0, state: 'rejected' as const, reason: 'empty' },
      { key: 'upload-2/0/a.txt', name: 'a.txt', size: 5, state: 'uploading' as const },
      { key: 'upload-2/1/bad.pdf', name: 'bad.pdf', size: 7, state: 'uploading' as const }];
    local = afterUpload(local, 'upload-2', { kept: [doc('d1', 'a.txt')], rejected: [{ name: 'bad.pdf', reason: 'not a PDF' }] },
      { 'a.txt': 5, 'bad.pdf': 7 });
    expect(local).toEqual([{ key: 'upload-2/0/bad.pdf', name: 'bad.pdf', size: 7, state: 'rejected', reason: 'not a PDF' }]);
  });
});

describe('documentRows and progress', () => {
  it('test_progress_moves_one_document_and_rows_list_documents_then_local_files', () => {
    let docs = [doc('d1', 'a.txt'), doc('d2', 'b.md')];
    docs = applyProgress(docs, { document_id: 'd2', status: 'embedding', chunks_done: 2, chunk_count: 5 });
    docs = applyProgress(docs, { document_id: 'gone', status: 'ready', chunks_done: 1, chunk_count: 1 });
    const rows = documentRows(docs, [{ key: 'u/0/c.pdf', name: 'c.pdf', size: 3, state: 'rejected', reason: 'corrupt' }]);
    expect(rows.map((r) => [r.name, r.status, r.chunksDone, r.chunkCount, r.error])).toEqual([
      ['a.txt', 'queued', 0, 0, null], ['b.md', 'embedding', 2, 5, null], ['c.pdf', 'rejected', 0, 0, 'corrupt']]);
    expect(rows[2].documentId).toBeNull();
  });

  it('test_merge_replaces_a_known_document_and_appends_a_new_one', () => {
    const merged = mergeDocuments([doc('d1', 'a.txt', 'ready')], [doc('d1', 'a.txt', 'queued'), doc('d2', 'b.md')]);
    expect(merged.map((d) => [d.id, d.status])).toEqual([['d1', 'queued'], ['d2', 'queued']]);
  });
});

describe('formatting and paging', () => {
  it('test_sizes_and_chunk_pages', () => {
    expect([formatSize(512), formatSize(1536), formatSize(3 * 1024 * 1024)]).toEqual(['512 B', '1.5 KB', '3.0 MB']);
    expect(chunkPage(0, 10, 25)).toEqual({ offset: 0, from: 1, to: 10, pages: 3 });
    expect(chunkPage(2, 10, 25)).toEqual({ offset: 20, from: 21, to: 25, pages: 3 });
    expect(chunkPage(9, 10, 25)).toEqual({ offset: 20, from: 21, to: 25, pages: 3 });
    expect(chunkPage(0, 10, 0)).toEqual({ offset: 0, from: 0, to: 0, pages: 1 });
  });
});
