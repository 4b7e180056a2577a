import { describe, expect, it } from 'vitest';
import { knowledgeRoute } from '../route';
import type { Dataset } from './api';
import { messageCitations, pickerOptions, retrievedChunks } from './citations';

function dataset(id: string, name: string, model: string | null = null): Dataset {
  return { id, name, description: '', embedding_model: model, chunking: { chunk_tokens: 512, overlap_tokens: 64,
    separators: [], split_headings: true, parent_child: null }, metadata_fields: [], document_count: 0, chunk_count: 0,
  created_at: 0, updated_at: 0 } as Dataset;
}

describe('pickerOptions', () => {
  it('test_datasets_are_offered_by_name_and_an_unknown_picked_id_is_flagged', () => {
    const options = pickerOptions([dataset('ds2', 'Support FAQ', 'embed'), dataset('ds1', 'Handbook')], ['ds2', 'gone']);
    expect(options.map((o) => [o.id, o.name, o.picked, o.missing])).toEqual([
      ['ds1', 'Handbook', false, false], ['ds2', 'Support FAQ', true, false], ['gone', 'gone', true, true]]);
    expect(options[1].detail).toBe('ds2 · embed');
  });
});

describe('citations', () => {
  it('test_a_messages_citation_parts_become_citations_each_once', () => {
    const piece = { citation_id: '1', chunk_id: 'c1', dataset_id: 'ds', document_id: 'd1', source_name: 'returns.md',
      position: 0, score: 0.8, text: 'Refunds within 14 days.' };
    const cited = messageCitations([{ type: 'text', data: {} }, { type: 'citation', data: piece },
      { type: 'citation', data: piece }, { type: 'citation', data: { text: 'no id' } }]);
    expect(cited).toEqual([{ citation_id: '1', chunk_id: 'c1', dataset_id: 'ds', source_name: 'returns.md',
      text: 'Refunds within 14 days.', score: 0.8, heading_path: undefined }]);
  });

  it('test_a_retrieval_nodes_chunks_read_as_citations_and_bad_outputs_as_none', () => {
    const outputs = { chunks: [{ citation_id: '2', text: 'Brew for two minutes.', score: 0.5, source_name: 'tea.md',
      heading_path: ['Green tea', 'Brewing'] }, 'junk', null] };
    expect(retrievedChunks(outputs).map((c) => [c.citation_id, c.source_name, c.heading_path])).toEqual([
      ['2', 'tea.md', ['Green tea', 'Brewing']]]);
    expect(retrievedChunks({ chunks: 'x' })).toEqual([]);
    expect(retrievedChunks(null)).toEqual([]);
  });
});

describe('knowledgeRoute', () => {
  it('test_the_knowledge_addresses', () => {
    expect(knowledgeRoute('#/knowledge')).toBeNull();
    expect(knowledgeRoute('#/knowledge/my%20docs')).toBe('my docs');
    expect(knowledgeRoute('#/w/flow')).toBeUndefined();
    expect(knowledgeRoute('')).toBeUndefined();
  });
});
