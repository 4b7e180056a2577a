import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { NodeKind, Problem } from '../api/types';
import {
  configHandles, MODEL_PROBE_NODE, modelProbeNode, nodeHandles, nodeOutputs, parseProbe, PROBE_HANDLE, PROBE_MODEL, PROBE_NODE,
  PROBE_OUTPUT, PROBE_SYS, probeDocument, varTypes,
  problemIndex, toolField, withoutProbe,
} from './shape';
import type { WorkflowDoc } from './workflow';

const doc = JSON.parse(readFileSync(join(__dirname, '..', '..', '..', 'examples', 'support_triage.json'), 'utf8')) as WorkflowDoc;

function kind(partial: Partial<NodeKind>): NodeKind {
  return { kind: 'k', title: 'K', description: '', category: '', icon: '', traits: {}, config_schema: {}, handles: null,
    outputs: null, config_dependent: true, ...partial } as NodeKind;
}

/** What the compiler answers to the probe (its message format, as `flowloom validate --json` prints it). */
const answer: Problem[] = [
  { code: 'unknown_handle', severity: 'error', node_id: 'triage', edge_id: `${PROBE_NODE}2`, path: 'sourceHandle',
    message: `node 'triage' has no output handle '${PROBE_HANDLE}' (handles: order_issue, product_question, other)` },
  { code: 'unknown_handle', severity: 'error', node_id: 'finish', edge_id: `${PROBE_NODE}9`, path: 'sourceHandle',
    message: `node 'finish' has no output handle '${PROBE_HANDLE}' (handles: )` },
  { code: 'unknown_output', severity: 'error', node_id: PROBE_NODE, edge_id: null, path: 'config.template',
    message: `node 'ticket' has no output '${PROBE_OUTPUT}' (outputs: email, fields, order_id, problem, success, usage)` },
  { code: 'unknown_output', severity: 'error', node_id: 'real', edge_id: null, path: 'config.template',
    message: "node 'x' has no output 'y' (outputs: a)" },
];

describe('node shapes', () => {
  it('test_probe_adds_one_edge_per_node_and_a_reader', () => {
    const probe = probeDocument(doc);
    expect(probe.nodes).toHaveLength(doc.nodes.length + 1);
    expect(probe.edges).toHaveLength(doc.edges.length + doc.nodes.length);
    const reader = probe.nodes.at(-1)!;
    expect(reader.id).toBe(PROBE_NODE);
    for (const n of doc.nodes) expect(String(reader.config?.template)).toContain(`nodes[${JSON.stringify(n.id)}]`);
    expect(doc.nodes.some((n) => n.id === PROBE_NODE)).toBe(false);
  });

  it('test_parse_probe_reads_handles_and_outputs', () => {
    const shapes = parseProbe(answer);
    expect(shapes.handles.triage).toEqual(['order_issue', 'product_question', 'other']);
    expect(shapes.handles.finish).toEqual([]);
    expect(shapes.outputs.ticket).toEqual(['email', 'fields', 'order_id', 'problem', 'success', 'usage']);
    expect(shapes.outputs.x).toBeUndefined();
  });

  it('test_model_probe_reads_the_registry_names', () => {
    const chat = kind({ kind: 'chat', config_schema: { properties: { model: { type: 'string', description: 'model name in the model registry' },
      prompt: { type: 'string', default: 'hi' } }, required: ['model'] } });
    const classify = kind({ kind: 'classify', config_schema: { properties: { model: { type: 'string', description: 'model name in the model registry' },
      categories: { type: 'array', minItems: 2, items: { type: 'string' } } }, required: ['model', 'categories'] } });
    const probe = modelProbeNode([kind({ kind: 'template' }), classify, chat]);
    expect(probe).toEqual({ id: MODEL_PROBE_NODE, type: 'chat', config: { model: PROBE_MODEL } });
    expect(modelProbeNode([kind({})])).toBeNull();
    const shapes = parseProbe([{ code: 'unknown_model', severity: 'error', node_id: MODEL_PROBE_NODE, edge_id: null,
      path: 'config.model', message: `model '${PROBE_MODEL}' is not in the model registry; did you mean 'x'? (known: default, gpt-4o, qwen-plus)` }]);
    expect(shapes.models).toEqual(['default', 'gpt-4o', 'qwen-plus']);
    expect(withoutProbe([{ code: 'unknown_model', severity: 'error', node_id: MODEL_PROBE_NODE, edge_id: null, path: null, message: '' }]))
      .toEqual([]);
  });

  it('test_probe_reads_declared_system_variables', () => {
    expect(String(probeDocument(doc).nodes.at(-1)?.config?.template)).toContain(`sys.${PROBE_SYS}`);
    const shapes = parseProbe([{ code: 'unknown_sys', severity: 'error', node_id: PROBE_NODE, edge_id: null, path: 'config.template',
      message: `sys.${PROBE_SYS} is not declared (declared: chat_id, history, now, query)` }]);
    expect(shapes.system).toEqual(['chat_id', 'history', 'now', 'query']);
  });

  it('test_var_types_come_from_the_catalog_schemas', () => {
    const k = kind({ config_schema: { $defs: { VarType: { title: 'VarType', enum: ['string', 'number'] } } } });
    expect(varTypes([kind({}), k])).toEqual(['string', 'number']);
    expect(varTypes([])).toEqual([]);
  });

  it('test_without_probe_keeps_real_problems_only', () => {
    expect(withoutProbe(answer).map((p) => p.node_id)).toEqual(['real']);
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

  it('test_node_handles_prefer_compiler_then_config_then_catalog_and_add_error', () => {
    const shapes = { handles: { n: ['x', 'y'] }, outputs: {} };
    expect(nodeHandles({ id: 'n', type: 'k' }, kind({}), shapes)).toEqual(['x', 'y']);
    expect(nodeHandles({ id: 'm', type: 'k' }, kind({ handles: [] }), shapes)).toEqual([]);
    expect(nodeHandles({ id: 'm', type: 'k' }, kind({}), shapes)).toEqual(['out']);
    expect(nodeHandles({ id: 'm', type: 'k', error_strategy: 'error_branch' }, kind({}), shapes)).toEqual(['out', 'error']);
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

  it('test_problem_index_counts_per_node', () => {
    const index = problemIndex(answer.slice(0, 2));
    expect(index.triage).toMatchObject({ errors: 1, warnings: 0 });
    expect(index.finish.text).toContain("node 'finish' has no output handle");
  });
});
