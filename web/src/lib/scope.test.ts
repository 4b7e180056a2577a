import { describe, expect, it } from 'vitest';
import { ancestors, availableVariables, readableNodes } from './scope';

const SYSTEM = ['query', 'history', 'now'];
import type { WorkflowDoc } from './workflow';

const doc: WorkflowDoc = {
  id: 'w',
  inputs: [{ name: 'q', type: 'string' }],
  variables: [{ name: 'count', type: 'number' }],
  nodes: [
    { id: 'start', type: 'start' },
    { id: 'a', type: 'template' },
    { id: 'b', type: 'template' },
    { id: 'side', type: 'template' },
    { id: 'it', type: 'iteration' },
    { id: 'in1', type: 'template', parent: 'it' },
    { id: 'in2', type: 'template', parent: 'it' },
    { id: 'after', type: 'answer' },
  ],
  edges: [
    { id: 'e1', source: 'start', target: 'a' },
    { id: 'e2', source: 'a', target: 'b' },
    { id: 'e3', source: 'start', target: 'side' },
    { id: 'e4', source: 'b', target: 'it' },
    { id: 'e5', source: 'in1', target: 'in2' },
    { id: 'e6', source: 'it', target: 'after' },
  ],
};

describe('variable scope', () => {
  it('test_ancestors_are_upstream_only', () => {
    expect([...ancestors(doc, 'b')].sort()).toEqual(['a', 'start']);
  });

  it('test_parallel_branch_is_not_offered', () => {
    expect(readableNodes(doc, 'b')).not.toContain('side');
  });

  it('test_body_node_reads_container_and_its_upstream', () => {
    const r = readableNodes(doc, 'in2');
    expect(new Set(r)).toEqual(new Set(['in1', 'it', 'b', 'a', 'start']));
    expect(r[0]).toBe('in1');
  });

  it('test_node_after_container_does_not_read_body', () => {
    expect(readableNodes(doc, 'after')).not.toContain('in1');
    expect(readableNodes(doc, 'after')).toContain('it');
  });

  it('test_container_reads_its_body_for_collect', () => {
    expect(readableNodes(doc, 'it')).toEqual(expect.arrayContaining(['in1', 'in2']));
  });

  it('test_available_variables_include_globals_and_outputs', () => {
    const vars = availableVariables(doc, 'b', SYSTEM, (id) => (id === 'a' ? ['output'] : id === 'start' ? ['q'] : []));
    const paths = vars.map((v) => v.path);
    expect(paths).toContain('inputs.q');
    expect(paths).toContain('vars.count');
    for (const s of SYSTEM) expect(paths).toContain(`sys.${s}`);
    expect(paths).toContain('a.output');
    expect(paths).toContain('start.q');
    expect(paths).not.toContain('side.output');
    const typed = availableVariables(doc, 'b', SYSTEM, (id) => (id === 'a' ? ['output'] : []), (_id, out) => (out === 'output' ? 'string' : undefined));
    expect(typed.find((v) => v.path === 'a.output')?.type).toBe('string');
  });

  it('test_available_variables_offer_environment_variables_secrets_as_strings', () => {
    const withEnv = { ...doc, environment: [{ name: 'TOKEN', type: 'secret' as const }, { name: 'LIMIT', type: 'number' as const, value: 3 }] };
    const vars = availableVariables(withEnv, 'b', SYSTEM, () => []);
    expect(vars.filter((v) => v.group === 'env')).toEqual([
      { path: 'env.TOKEN', group: 'env', type: 'string' }, { path: 'env.LIMIT', group: 'env', type: 'number' }]);
  });
});
