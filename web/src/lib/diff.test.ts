import { describe, expect, it } from 'vitest';
import { diffWorkflows, isEmptyDiff, jsonEqual } from './diff';
import type { WorkflowDoc } from './workflow';

const before: WorkflowDoc = {
  id: 'w', name: 'A', version: 1,
  nodes: [{ id: 'start', type: 'start' }, { id: 't', type: 'template', config: { template: 'x' } }, { id: 'old', type: 'answer' }],
  edges: [{ id: 'e1', source: 'start', target: 't' }, { id: 'e2', source: 't', target: 'old' }],
};

describe('version diff', () => {
  it('test_identical_documents_have_empty_diff', () => {
    expect(isEmptyDiff(diffWorkflows(before, structuredClone(before)))).toBe(true);
  });

  it('test_added_removed_and_changed_are_listed', () => {
    const after: WorkflowDoc = {
      ...before, name: 'B', version: 2,
      nodes: [{ id: 'start', type: 'start' }, { id: 't', type: 'template', config: { template: 'y' } }, { id: 'new', type: 'answer' }],
      edges: [{ id: 'e1', source: 'start', target: 't', sourceHandle: 'out' }, { id: 'e3', source: 't', target: 'new' }],
    };
    const d = diffWorkflows(before, after);
    expect(d.nodesAdded).toEqual(['new']);
    expect(d.nodesRemoved).toEqual(['old']);
    expect(d.nodesChanged).toEqual([{ id: 't', fields: ['config'] }]);
    expect(d.edgesAdded).toEqual(['e3']);
    expect(d.edgesRemoved).toEqual(['e2']);
    expect(d.edgesChanged).toEqual([]);
    expect(d.settingsChanged).toEqual(['name']);
  });

  it('test_json_equal_ignores_key_order', () => {
    expect(jsonEqual({ a: 1, b: [1, { c: 2 }] }, { b: [1, { c: 2 }], a: 1 })).toBe(true);
    expect(jsonEqual({ a: 1 }, { a: 1, b: 2 })).toBe(false);
  });
});
