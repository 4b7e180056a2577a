import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { jsonEqual } from './diff';
import { docToFlow, flowToDoc, freshId } from './serialize';
import type { WorkflowDoc } from './workflow';

const EXAMPLES = join(__dirname, '..', '..', '..', 'examples');

/** The document with the defaults the canvas writes out made explicit (an edge's
 * `sourceHandle` "out", a node's position {0, 0}), so a file that leaves them out
 * compares equal to what the canvas gives back. */
function normalise(doc: WorkflowDoc): WorkflowDoc {
  return {
    ...doc,
    nodes: doc.nodes.map((n) => ({ ...n, position: n.position ?? { x: 0, y: 0 } })),
    edges: doc.edges.map((e) => {
      const out = { ...e, sourceHandle: e.sourceHandle ?? 'out' };
      if (out.targetHandle === 'in') delete out.targetHandle;
      return out;
    }),
  };
}

const files = readdirSync(EXAMPLES).filter((f) => f.endsWith('.json'));

describe('workflow JSON <-> React Flow', () => {
  it('test_examples_folder_has_workflows', () => {
    expect(files.length).toBeGreaterThan(5);
  });

  it.each(files)('test_round_trip_keeps_%s', (file) => {
    const doc = JSON.parse(readFileSync(join(EXAMPLES, file), 'utf8')) as WorkflowDoc;
    const { meta, nodes, edges } = docToFlow(doc, new Set(['iteration', 'loop', 'tool_call', 'agent']));
    const back = flowToDoc(meta, nodes, edges);
    expect(jsonEqual(back, normalise(doc))).toBe(true);
    expect(back.nodes.map((n) => n.id)).toEqual(doc.nodes.map((n) => n.id));
  });

  it('test_body_nodes_are_relative_to_their_container_and_after_it', () => {
    const doc: WorkflowDoc = {
      id: 'w',
      nodes: [
        { id: 'child', type: 'template', parent: 'loop', position: { x: 150, y: 260 }, config: { template: 'x' } },
        { id: 'loop', type: 'iteration', position: { x: 100, y: 200 }, config: {} },
      ],
      edges: [],
    };
    const { meta, nodes, edges } = docToFlow(doc, new Set(['iteration']));
    expect(nodes.map((n) => n.id)).toEqual(['loop', 'child']);
    expect(nodes[1]).toMatchObject({ parentId: 'loop', position: { x: 50, y: 60 } });
    expect(nodes[0].width).toBeGreaterThan(0);
    const back = flowToDoc(meta, [{ ...nodes[0], position: { x: 0, y: 0 } }, nodes[1]], edges);
    expect(back.nodes[0]).toMatchObject({ id: 'child', parent: 'loop', position: { x: 50, y: 60 } });
  });

  it('test_notes_round_trip_with_their_own_ids', () => {
    const doc: WorkflowDoc = { id: 'w', nodes: [{ id: 'note', type: 'start', position: { x: 0, y: 0 } }], edges: [],
      notes: [{ id: 'note', text: 'hi', position: { x: 5, y: 6 }, width: 300, height: 100, color: '#ffee00' }] };
    const { meta, nodes, notes, edges } = docToFlow(doc);
    expect(notes.map((n) => n.id)).toEqual(['note:note']);
    expect(flowToDoc(meta, [...nodes, ...notes], edges)).toEqual(doc);
    expect(flowToDoc(meta, nodes, edges).notes).toBeUndefined();
  });

  it('test_fresh_id_skips_taken_ids', () => {
    expect(freshId('chat', new Set())).toBe('chat');
    expect(freshId('chat', new Set(['chat', 'chat_2']))).toBe('chat_3');
    expect(freshId('9 lives', new Set())).toBe('n_9_lives');
  });
});

describe('parents before children', () => {
  it('test_parents_first_moves_containers_ahead_stably', async () => {
    const { parentsFirst } = await import('./serialize');
    const out = parentsFirst([{ id: 'a', parentId: 'c' }, { id: 'b' }, { id: 'c' }, { id: 'd', parentId: 'a' }]);
    expect(out.map((n) => n.id)).toEqual(['b', 'c', 'a', 'd']);
  });
});
