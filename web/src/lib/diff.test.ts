import { describe, expect, it } from 'vitest';
import { diffFields, diffWorkflows, excerpts, jsonEqual, valueText, type Change } from './diff';
import type { WorkflowDoc, WorkflowNode } from './workflow';

const before: WorkflowDoc = {
  id: 'w', name: 'A', version: 1, description: 'first', inputs: [{ name: 'q', type: 'string' }],
  nodes: [
    { id: 'start', type: 'start', position: { x: 0, y: 0 } },
    { id: 't', type: 'template', name: 'Greeting', position: { x: 200, y: 0 }, config: { template: 'x' } },
    { id: 'old', type: 'answer', name: 'Old answer', config: { text: 'bye' } },
    {
      id: 'branch', type: 'if_else', config: {
        cases: [{ case_id: 'yes', logical_operator: 'and', conditions: [
          { left: { ref: 'start.q' }, operator: 'contains', right: 'a' },
          { left: { ref: 'start.q' }, operator: 'contains', right: 'b' },
        ] }],
      },
    },
  ],
  edges: [
    { id: 'e1', source: 'start', target: 't' },
    { id: 'e2', source: 't', target: 'old' },
    { id: 'e3', source: 'branch', sourceHandle: 'yes', target: 't' },
  ],
};

function edit(fn: (doc: WorkflowDoc) => void): WorkflowDoc {
  const doc = structuredClone(before);
  fn(doc);
  return doc;
}

function node(doc: WorkflowDoc, id: string): WorkflowNode {
  return doc.nodes.find((n) => n.id === id)!;
}

function ofType<T extends Change['type']>(changes: Change[], type: T): Extract<Change, { type: T }>[] {
  return changes.filter((c): c is Extract<Change, { type: T }> => c.type === type);
}

describe('diffWorkflows', () => {
  it('test_identical_documents_have_no_changes', () => {
    expect(diffWorkflows(before, structuredClone(before))).toEqual([]);
  });

  it('test_draft_counter_and_defaults_are_not_changes', () => {
    const after = edit((d) => {
      d.version = 7;
      d.variables = [];
      d.edges[0].sourceHandle = 'out';
      d.edges[1].targetHandle = 'in';
      node(d, 't').parent = null;
    });
    expect(diffWorkflows(before, after)).toEqual([]);
  });

  it('test_added_and_removed_nodes_carry_id_kind_and_title', () => {
    const after = edit((d) => {
      d.nodes = d.nodes.filter((n) => n.id !== 'old');
      d.nodes.push({ id: 'new', type: 'answer', config: { text: 'hi' } });
    });
    const changes = diffWorkflows(before, after);
    expect(ofType(changes, 'node_added')).toEqual([{ type: 'node_added', node: { id: 'new', type: 'answer', title: 'new' } }]);
    expect(ofType(changes, 'node_removed'))
      .toEqual([{ type: 'node_removed', node: { id: 'old', type: 'answer', title: 'Old answer' } }]);
    expect(ofType(changes, 'node_changed')).toEqual([]);
  });

  it('test_changed_node_lists_leaf_paths_with_old_and_new_values', () => {
    const after = edit((d) => {
      node(d, 't').config = { template: 'y' };
      node(d, 't').name = 'Hello';
      node(d, 't').timeout = 30;
    });
    const [change] = ofType(diffWorkflows(before, after), 'node_changed');
    expect(change.node).toEqual({ id: 't', type: 'template', title: 'Hello' });
    expect(change.moved).toBe(false);
    expect(change.fields).toEqual([
      { path: 'name', before: 'Greeting', after: 'Hello' },
      { path: 'config.template', before: 'x', after: 'y' },
      { path: 'timeout', before: undefined, after: 30 },
    ]);
  });

  it('test_nested_config_paths_go_down_to_the_condition', () => {
    const after = edit((d) => {
      const conds = (node(d, 'branch').config!.cases as { conditions: { right: string }[] }[])[0].conditions;
      conds[1].right = 'c';
    });
    const [change] = ofType(diffWorkflows(before, after), 'node_changed');
    expect(change.fields).toEqual([{ path: 'config.cases[0].conditions[1].right', before: 'b', after: 'c' }]);
  });

  it('test_a_reference_is_one_value', () => {
    const after = edit((d) => {
      const conds = (node(d, 'branch').config!.cases as { conditions: { left: unknown }[] }[])[0].conditions;
      conds[0].left = { ref: 't.output' };
    });
    const [change] = ofType(diffWorkflows(before, after), 'node_changed');
    expect(change.fields).toEqual([
      { path: 'config.cases[0].conditions[0].left', before: { ref: 'start.q' }, after: { ref: 't.output' } },
    ]);
  });

  it('test_an_item_inserted_in_a_list_is_one_added_item', () => {
    const after = edit((d) => {
      const conds = (node(d, 'branch').config!.cases as { conditions: unknown[] }[])[0].conditions;
      conds.splice(1, 0, { left: { ref: 'start.q' }, operator: 'is', right: 'z' });
    });
    const [change] = ofType(diffWorkflows(before, after), 'node_changed');
    expect(change.fields).toEqual([{ path: 'config.cases[0].conditions[1]', before: undefined,
      after: { left: { ref: 'start.q' }, operator: 'is', right: 'z' } }]);
  });

  it('test_moves_are_ignored_unless_asked_for', () => {
    const after = edit((d) => { node(d, 't').position = { x: 500, y: 90 }; });
    expect(diffWorkflows(before, after)).toEqual([]);
    expect(diffWorkflows(before, after, { moves: true })).toEqual([{ type: 'node_moved',
      node: { id: 't', type: 'template', title: 'Greeting' }, before: { x: 200, y: 0 }, after: { x: 500, y: 90 } }]);
  });

  it('test_a_changed_and_moved_node_has_no_position_field', () => {
    const after = edit((d) => {
      node(d, 't').position = { x: 1, y: 1 };
      node(d, 't').config = { template: 'z' };
    });
    const [change] = ofType(diffWorkflows(before, after), 'node_changed');
    expect(change.moved).toBe(true);
    expect(change.fields.map((f) => f.path)).toEqual(['config.template']);
  });

  it('test_edges_added_and_removed_by_what_they_connect', () => {
    const after = edit((d) => {
      d.edges = [
        { id: 'e1-redrawn', source: 'start', target: 't' },
        { id: 'e3', source: 'branch', sourceHandle: 'else', target: 't' },
        { id: 'e4', source: 't', target: 'branch' },
      ];
    });
    const changes = diffWorkflows(before, after);
    expect(ofType(changes, 'edge_added').map((c) => c.edge)).toEqual([
      { id: 'e3', source: 'branch', sourceHandle: 'else', target: 't', targetHandle: 'in' },
      { id: 'e4', source: 't', sourceHandle: 'out', target: 'branch', targetHandle: 'in' },
    ]);
    expect(ofType(changes, 'edge_removed').map((c) => c.edge)).toEqual([
      { id: 'e2', source: 't', sourceHandle: 'out', target: 'old', targetHandle: 'in' },
      { id: 'e3', source: 'branch', sourceHandle: 'yes', target: 't', targetHandle: 'in' },
    ]);
    expect(changes.every((c) => c.type.startsWith('edge_'))).toBe(true);
  });

  it('test_workflow_fields_inputs_variables_and_notes', () => {
    const after = edit((d) => {
      d.name = 'B';
      delete d.description;
      d.inputs![0].type = 'number';
      d.variables = [{ name: 'count', type: 'number', default: 0 }];
      d.limits = { max_steps: 50 };
      d.notes = [{ id: 'n1', text: 'remember', position: { x: 1, y: 2 } }];
    });
    const fields = ofType(diffWorkflows(before, after), 'workflow_changed').map((c) => c.field);
    expect(fields).toEqual([
      { path: 'name', before: 'A', after: 'B' },
      { path: 'description', before: 'first', after: undefined },
      { path: 'inputs[0].type', before: 'string', after: 'number' },
      { path: 'variables', before: undefined, after: [{ name: 'count', type: 'number', default: 0 }] },
      { path: 'limits', before: undefined, after: { max_steps: 50 } },
      { path: 'notes', before: undefined, after: [{ id: 'n1', text: 'remember' }] },
    ]);
  });

  it('test_moving_or_resizing_a_note_is_not_a_change', () => {
    const withNote = edit((d) => { d.notes = [{ id: 'n1', text: 'a', position: { x: 0, y: 0 }, width: 240 }]; });
    const moved = structuredClone(withNote);
    moved.notes![0] = { id: 'n1', text: 'a', position: { x: 90, y: 9 }, width: 400, height: 300 };
    expect(diffWorkflows(withNote, moved)).toEqual([]);
    moved.notes![0].text = 'b';
    expect(ofType(diffWorkflows(withNote, moved), 'workflow_changed').map((c) => c.field.path)).toEqual(['notes[0].text']);
  });

  it('test_two_hundred_nodes_are_quick', () => {
    const big: WorkflowDoc = { id: 'big', nodes: [], edges: [] };
    for (let i = 0; i < 200; i += 1) {
      big.nodes.push({ id: `n${i}`, type: 'llm', position: { x: i, y: i },
        config: { model: 'default', prompt: [{ role: 'user', text: `hello ${i} `.repeat(50) }], temperature: 0.2 } });
      if (i) big.edges.push({ id: `e${i}`, source: `n${i - 1}`, target: `n${i}` });
    }
    const changed = structuredClone(big);
    (changed.nodes[150].config!.prompt as { text: string }[])[0].text = 'changed';
    const t0 = performance.now();
    const changes = diffWorkflows(big, changed);
    expect(performance.now() - t0).toBeLessThan(200);
    expect(changes).toEqual([{ type: 'node_changed', node: { id: 'n150', type: 'llm', title: 'n150' }, moved: false,
      fields: [{ path: 'config.prompt[0].text', before: `hello 150 `.repeat(50), after: 'changed' }] }]);
  });
});

describe('field paths', () => {
  it('test_odd_keys_are_quoted', () => {
    expect(diffFields({ headers: { 'X-Key': 'a' } }, { headers: { 'X-Key': 'b' } }).map((f) => f.path))
      .toEqual(['headers["X-Key"]']);
  });

  it('test_type_change_is_one_field', () => {
    expect(diffFields({ v: [1] }, { v: { a: 1 } })).toEqual([{ path: 'v', before: [1], after: { a: 1 } }]);
  });
});

describe('display', () => {
  it('test_value_text', () => {
    expect(valueText('hi')).toBe('hi');
    expect(valueText('')).toBe('""');
    expect(valueText(3)).toBe('3');
    expect(valueText(null)).toBe('null');
    expect(valueText(undefined)).toBe('');
    expect(valueText({ a: 1 })).toBe('{\n  "a": 1\n}');
  });

  it('test_short_values_are_whole', () => {
    expect(excerpts('a', 'b')).toEqual([{ text: 'a', cut: false }, { text: 'b', cut: false }]);
  });

  it('test_long_values_are_cut_around_the_first_difference', () => {
    const head = 'x'.repeat(300);
    const [a, b] = excerpts(`${head} old ending`, `${head} new ending`, 120);
    expect(a.cut && b.cut).toBe(true);
    expect(a.text).toMatch(/^….* old ending$/);
    expect(b.text).toMatch(/^….* new ending$/);
    expect(a.text.length).toBeLessThanOrEqual(122);
    const [c] = excerpts('y'.repeat(500), 'short', 120);
    expect(c).toEqual({ text: `${'y'.repeat(120)}…`, cut: true });
  });
});

describe('jsonEqual', () => {
  it('test_json_equal_ignores_key_order', () => {
    expect(jsonEqual({ a: 1, b: [1, { c: 2 }] }, { b: [1, { c: 2 }], a: 1 })).toBe(true);
    expect(jsonEqual({ a: 1 }, { a: 1, b: 2 })).toBe(false);
  });
});
