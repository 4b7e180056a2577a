import { describe, expect, it } from 'vitest';
import type { Dataset } from './api';
import { datasetBody, datasetPatch, draftOf } from './DatasetForm';

const handbook = { id: 'hb', name: 'Handbook', description: 'rules', embedding_model: 'embed',
  chunking: { chunk_tokens: 256, overlap_tokens: 32, separators: [], split_headings: true, parent_child: null },
  metadata_fields: [], document_count: 2, chunk_count: 9, created_at: 0, updated_at: 0 } as unknown as Dataset;

describe('dataset form bodies', () => {
  it('test_a_new_dataset_without_a_model_searches_full_text_and_parent_child_sends_its_child_size', () => {
    const draft = { ...draftOf(null), name: ' Notes ', parentChild: true, childTokens: 64 };
    expect(datasetBody(draft)).toEqual({ name: 'Notes', description: '', embedding_model: null, chunking: {
      chunk_tokens: 512, overlap_tokens: 64, split_headings: true, parent_child: { child_tokens: 64, child_overlap_tokens: 0 } } });
  });

  it('test_an_edit_sends_the_model_only_when_it_changed_and_clears_it_when_removed', () => {
    const same = datasetPatch(handbook, { ...draftOf(handbook), name: 'Staff handbook' });
    expect(same).toEqual({ name: 'Staff handbook', description: 'rules', chunking: { chunk_tokens: 256, overlap_tokens: 32,
      split_headings: true, parent_child: null } });
    expect(datasetPatch(handbook, { ...draftOf(handbook), model: 'bge-m3' }).embedding_model).toBe('bge-m3');
    const cleared = datasetPatch(handbook, { ...draftOf(handbook), model: '' });
    expect([cleared.clear_embedding_model, 'embedding_model' in cleared]).toEqual([true, false]);
  });
});
