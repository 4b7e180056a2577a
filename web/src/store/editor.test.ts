import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { NodeKind } from '../api/types';
import { isFlowNode, type FlowNode } from '../lib/serialize';
import type { WorkflowDoc } from '../lib/workflow';
import { useCatalog } from './catalog';
import { currentDoc, useEditor } from './editor';

function kind(k: string, extra: Partial<NodeKind> = {}): NodeKind {
  return { kind: k, title: k, description: '', category: 'x', icon: '', traits: {}, config_schema: { properties: {} },
    handles: null, outputs: null, config_dependent: true, ...extra } as NodeKind;
}

const branchSchema = {
  description: "the first matching case's handle is taken, else ``else``.",
  properties: { cases: { type: 'array', items: { $ref: '#/$defs/Case' } } },
  required: ['cases'],
  $defs: { Case: { type: 'object', description: 'its ``id`` is the output handle', properties: { id: { type: 'string' } } } },
};

const doc: WorkflowDoc = {
  id: 'w',
  nodes: [
    { id: 'start', type: 'start', position: { x: 0, y: 0 } },
    { id: 'llm', type: 'template', position: { x: 200, y: 0 }, config: { template: 'hi' } },
    { id: 'branch', type: 'if_else', position: { x: 400, y: 0 }, config: { cases: [{ id: 'yes' }] } },
    { id: 'say', type: 'answer', position: { x: 600, y: 0 }, config: { text: '{{ llm.output }}', other: { ref: 'llm.output' } } },
  ],
  edges: [
    { id: 'e1', source: 'start', sourceHandle: 'out', target: 'llm' },
    { id: 'e2', source: 'llm', sourceHandle: 'out', target: 'branch' },
    { id: 'e3', source: 'branch', sourceHandle: 'yes', target: 'say' },
  ],
};

const node = (id: string) => useEditor.getState().nodes.filter(isFlowNode).find((n) => n.id === id) as FlowNode;

beforeEach(() => {
  useCatalog.getState().setKinds([kind('start', { traits: { entry: true }, handles: ['out'] }), kind('template'),
    kind('answer'), kind('if_else', { config_schema: branchSchema })]);
  useEditor.getState().load('w', structuredClone(doc), 1, null);
});

afterEach(() => {
  vi.useRealTimers();
});

describe('editor store', () => {
  it('test_new_model_node_starts_on_a_registry_model', () => {
    const chat = kind('chat', { config_schema: { properties: { model: { type: 'string', minLength: 1 } },
      required: ['model'] } });
    useCatalog.getState().setKinds([...useCatalog.getState().kinds, chat], { models: ['fast', 'default'] });
    const id = useEditor.getState().addNode('chat', { x: 0, y: 300 })!;
    expect(node(id).data.node.config?.model).toBe('default');
  });

  it('test_typing_bursts_are_one_undo_step', () => {
    vi.useFakeTimers();
    vi.setSystemTime(10_000);
    const s = useEditor.getState();
    s.setConfig('llm', { template: 'h' });
    vi.setSystemTime(10_200);
    s.setConfig('llm', { template: 'he' });
    vi.setSystemTime(10_400);
    s.setConfig('llm', { template: 'hey' });
    expect(useEditor.temporal.getState().pastStates).toHaveLength(1);
    vi.setSystemTime(20_000);
    s.setConfig('llm', { template: 'hey!' });
    expect(useEditor.temporal.getState().pastStates).toHaveLength(2);
    useEditor.temporal.getState().undo();
    useEditor.temporal.getState().undo();
    expect(currentDoc()).toEqual(doc);
  });

  it('test_load_then_current_doc_round_trips', () => {
    expect(currentDoc()).toEqual(doc);
  });

  it('test_opening_a_workflow_is_not_a_change_to_save', () => {
    const reordered = { ...structuredClone(doc), nodes: doc.nodes.map(({ position, ...rest }) => ({ ...rest, position })) };
    useEditor.getState().load('w', reordered as WorkflowDoc, 3, null);
    expect(JSON.stringify(currentDoc())).toBe(useEditor.getState().savedJson);
  });

  it('test_rename_node_rewrites_readers_and_edges', () => {
    expect(useEditor.getState().renameNode('llm', 'writer')).toBeNull();
    const d = currentDoc();
    expect(d.nodes.map((n) => n.id)).toEqual(['start', 'writer', 'branch', 'say']);
    expect(d.nodes[3].config).toEqual({ text: '{{ writer.output }}', other: { ref: 'writer.output' } });
    expect(d.edges.map((e) => [e.source, e.target])).toEqual([['start', 'writer'], ['writer', 'branch'], ['branch', 'say']]);
  });

  it('test_rename_to_taken_id_is_refused', () => {
    expect(useEditor.getState().renameNode('llm', 'say')).toBe('taken');
    expect(node('llm')).toBeTruthy();
  });

  it('test_delete_flags_readers_and_drops_edges', () => {
    useEditor.getState().deleteNodes(['llm']);
    const s = useEditor.getState();
    expect(s.flagged).toEqual({ say: ['llm'] });
    expect(currentDoc().edges.map((e) => e.id)).toEqual(['e3']);
  });

  it('test_undo_and_redo_restore_the_document', () => {
    useEditor.getState().deleteNodes(['say']);
    expect(currentDoc().nodes).toHaveLength(3);
    useEditor.temporal.getState().undo();
    expect(currentDoc()).toEqual(doc);
    useEditor.temporal.getState().redo();
    expect(currentDoc().nodes).toHaveLength(3);
  });

  it('test_selection_changes_are_not_undo_steps', () => {
    useEditor.getState().select(['llm']);
    expect(useEditor.temporal.getState().pastStates).toHaveLength(0);
  });

  it('test_renaming_a_case_moves_its_edges', () => {
    useEditor.getState().setConfig('branch', { cases: [{ id: 'approved' }] });
    expect(currentDoc().edges.find((e) => e.id === 'e3')?.sourceHandle).toBe('approved');
  });

  it('test_output_rename_seen_by_validator_follows_in_readers', () => {
    const s = useEditor.getState();
    s.applyShapes({ handles: {}, outputs: { llm: ['output'] } });
    s.applyShapes({ handles: {}, outputs: { llm: ['result'] } });
    expect(currentDoc().nodes[3].config).toEqual({ text: '{{ llm.result }}', other: { ref: 'llm.result' } });
  });

  it('test_copy_paste_gives_fresh_ids_and_remapped_refs', () => {
    useEditor.getState().select(['llm', 'say']);
    expect(useEditor.getState().copySelection()).toBe(2);
    useEditor.getState().paste();
    const d = currentDoc();
    expect(d.nodes.map((n) => n.id)).toEqual(['start', 'llm', 'branch', 'say', 'llm_2', 'say_2']);
    expect(d.nodes[5].config).toEqual({ text: '{{ llm_2.output }}', other: { ref: 'llm_2.output' } });
    expect(d.nodes[4].position).toEqual({ x: 240, y: 40 });
  });

  it('test_each_paste_lands_further_on_and_counts_its_nodes', () => {
    useEditor.getState().select(['llm']);
    useEditor.getState().copySelection();
    expect(useEditor.getState().paste()).toBe(1);
    expect(useEditor.getState().paste()).toBe(1);
    const positions = currentDoc().nodes.filter((n) => n.id.startsWith('llm')).map((n) => n.position);
    expect(positions).toEqual([{ x: 200, y: 0 }, { x: 240, y: 40 }, { x: 280, y: 80 }]);
  });

  it('test_connect_refuses_cycle_and_adds_valid_edge', () => {
    const s = useEditor.getState();
    expect(s.connect({ source: 'say', target: 'llm', sourceHandle: 'out', targetHandle: 'in' })).toEqual({ code: 'cycle' });
    expect(s.connect({ source: 'start', target: 'say', sourceHandle: 'out', targetHandle: 'in' })).toBeNull();
    expect(currentDoc().edges).toHaveLength(4);
  });

  it('test_replace_document_is_one_undoable_change', () => {
    const other: WorkflowDoc = { id: 'other', nodes: [{ id: 'start', type: 'start', position: { x: 0, y: 0 } }], edges: [] };
    useEditor.getState().replaceDocument(other);
    expect(currentDoc()).toMatchObject({ id: 'w', nodes: [{ id: 'start' }], edges: [] });
    useEditor.temporal.getState().undo();
    expect(currentDoc()).toEqual(doc);
  });

  it('test_add_node_from_handle_connects_it', () => {
    const id = useEditor.getState().addNode('answer', { x: 800, y: 0 }, { from: { node: 'say', handle: 'out' } });
    expect(id).toBe('answer');
    const d = currentDoc();
    expect(d.edges.at(-1)).toMatchObject({ source: 'say', sourceHandle: 'out', target: 'answer' });
    expect(d.nodes.at(-1)).toMatchObject({ id: 'answer', type: 'answer', config: {} });
  });
});

describe('auto-layout of bodies', () => {
  it('test_layout_grows_container_frames_to_hold_their_body', () => {
    useCatalog.getState().setKinds([kind('start', { traits: { entry: true }, handles: ['out'] }), kind('template'),
      kind('iteration', { traits: { container: true } })]);
    const body: WorkflowDoc = {
      id: 'w',
      nodes: [
        { id: 'start', type: 'start', position: { x: 0, y: 0 } },
        { id: 'it', type: 'iteration', position: { x: 300, y: 0 }, config: {} },
        ...['a', 'b', 'c', 'd'].map((id) => ({ id, type: 'template', parent: 'it', position: { x: 300, y: 0 }, config: {} })),
      ],
      edges: [{ id: 'e0', source: 'start', target: 'it' }, { id: 'e1', source: 'a', target: 'b' },
        { id: 'e2', source: 'b', target: 'c' }, { id: 'e3', source: 'c', target: 'd' }],
    };
    useEditor.getState().load('w', body, 1, null);
    useEditor.getState().autoLayout();
    const nodes = useEditor.getState().nodes;
    const frame = nodes.find((n) => n.id === 'it')!;
    const last = nodes.find((n) => n.id === 'd')!;
    expect(frame.width!).toBeGreaterThanOrEqual(last.position.x + 200);
    expect(nodes.find((n) => n.id === 'start')!.position.x + 200).toBeLessThanOrEqual(frame.position.x);
  });
});
