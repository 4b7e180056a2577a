import { describe, expect, it } from 'vitest';
import type { NodeKind, Problem } from '../api/types';
import { configHandles, nodeHandles, nodeOutputs, problemIndex, shapesOf, toolField, varTypes } from './shape';

function kind(partial: Partial<NodeKind>): NodeKind {
  return { kind: 'k', title: 'K', description: '', category: '', icon: '', traits: {}, config_schema: {}, handles: null,
    outputs: null, config_dependent: true, ...partial } as NodeKind;
}

const problems: Problem[] = [
  { code: 'unknown_output', severity: 'error', node_id: 'say', edge_id: null, path: 'config.text',
    message: "node 'llm' has no output 'x' (outputs: answer)" },
  { code: 'unreachable', severity: 'warning', node_id: 'say', edge_id: null, path: null, message: 'no path' },
  { code: 'cycle', severity: 'error', node_id: null, edge_id: 'e1', path: null, message: 'cycle' },
];

describe('node shapes', () => {
  it('test_shapes_of_validate_answer_keep_handles_outputs_and_types', () => {
    const shapes = shapesOf({ nodes: {
      triage: { handles: ['order', 'other', 'error'], outputs: { category: 'string', usage: 'object' } },
      half: { handles: ['out'], outputs: null },
    } });
    expect(shapes.handles).toEqual({ triage: ['order', 'other', 'error'], half: ['out'] });
    expect(shapes.outputs).toEqual({ triage: ['category', 'usage'] });
    expect(shapes.types?.triage.category).toBe('string');
    expect(shapesOf({})).toEqual({ handles: {}, outputs: {}, types: {} });
  });

  it('test_config_handles_from_id_lists_described_as_handles', () => {
    const schema = {
      description: "Cases checked in order; the first matching case's handle is taken, else ``else``.",
      properties: { cases: { type: 'array', items: { $ref: '#/$defs/Case' } } },
      $defs: { Case: { description: 'its ``id`` is the output handle', properties: { id: { type: 'string' } } } },
    };
    const k = kind({ config_schema: schema });
    expect(configHandles({ config: { cases: [{ id: 'a' }, { id: 'b' }] } }, k)).toEqual(['a', 'b', 'else']);
    expect(configHandles({ config: {} }, kind({ config_schema: { properties: { x: { type: 'string' } } } }))).toBeNull();
  });

  it('test_node_handles_prefer_server_then_config_then_catalog_and_add_error', () => {
    const shapes = { handles: { n: ['x', 'y'] }, outputs: {} };
    expect(nodeHandles({ id: 'n', type: 'k' }, kind({}), shapes)).toEqual(['x', 'y']);
    expect(nodeHandles({ id: 'm', type: 'k' }, kind({ handles: [] }), shapes)).toEqual([]);
    expect(nodeHandles({ id: 'm', type: 'k' }, kind({}), shapes)).toEqual(['out']);
    expect(nodeHandles({ id: 'm', type: 'k', error_strategy: 'error_branch' }, kind({}), shapes)).toEqual(['out', 'error']);
    const withError = { handles: { n: ['out', 'error'] }, outputs: {} };
    expect(nodeHandles({ id: 'n', type: 'k', error_strategy: 'error_branch' }, kind({}), withError)).toEqual(['out', 'error']);
  });

  it('test_node_outputs_fall_back_to_catalog_defaults', () => {
    const shapes = { handles: {}, outputs: { n: ['answer'] } };
    expect(nodeOutputs({ id: 'n' }, kind({}), shapes)).toEqual(['answer']);
    expect(nodeOutputs({ id: 'm' }, kind({ outputs: { rounds: 'number' } }), shapes)).toEqual(['rounds']);
    expect(nodeOutputs({ id: 'm', error_strategy: 'error_branch' }, kind({}), shapes)).toEqual(['error']);
  });

  it('test_tool_field_is_the_list_naming_body_nodes', () => {
    const schema = { properties: { tools: { type: 'array', items: { $ref: '#/$defs/T' } }, name: { type: 'string' } },
      $defs: { T: { properties: { node: { type: 'string' }, name: { type: 'string' } } } } };
    expect(toolField(kind({ config_schema: schema }))).toBe('tools');
    expect(toolField(kind({}))).toBeNull();
  });

  it('test_var_types_come_from_the_catalog_schemas', () => {
    const k = kind({ config_schema: { $defs: { VarType: { title: 'VarType', enum: ['string', 'number'] } } } });
    expect(varTypes([kind({}), k])).toEqual(['string', 'number']);
    expect(varTypes([])).toEqual([]);
  });

  it('test_problem_index_counts_per_node_errors_first', () => {
    const index = problemIndex(problems);
    expect(index.say).toEqual({ errors: 1, warnings: 1, text: "node 'llm' has no output 'x' (outputs: answer)\nno path" });
    expect(Object.keys(index)).toEqual(['say']);
  });
});
