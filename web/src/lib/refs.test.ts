import { describe, expect, it } from 'vitest';
import { nodeReads, refNode, refOutput, refPath, renameNodeInConfig, renameOutputInConfig, splitRef } from './refs';

describe('reference paths', () => {
  it('test_ref_path_spells_plain_and_quoted_ids', () => {
    expect(refPath('llm', 'answer')).toBe('llm.answer');
    expect(refPath('提问', 'text')).toBe('nodes["提问"].text');
    expect(refPath('end', '1')).toBe('end["1"]');
    expect(refPath('c', 'say "hi"')).toBe("c['say \"hi\"']");
    expect(refPath('inputs', 'x')).toBe('nodes["inputs"].x');
  });

  it('test_ref_node_and_output_are_read_back', () => {
    expect(refNode('search.json.items[0].title')).toBe('search');
    expect(refOutput('search.json.items[0].title')).toBe('json');
    expect(refNode('nodes["a b"].out')).toBe('a b');
    expect(refOutput('nodes["a b"]["结果"]')).toBe('结果');
    expect(refNode('inputs.q')).toBeNull();
    expect(splitRef('x.y[0]')).toEqual({ node: 'x', output: 'y', rest: '[0]' });
  });
});

describe('renames follow in configs', () => {
  const config = {
    template: 'Hi {{ llm.answer }} and {{ nodes["llm"].usage }}; llm. stays literal',
    value: { ref: 'llm.answer.text' },
    other: { ref: 'llmx.answer' },
    list: [{ ref: 'inputs.q' }],
  };

  it('test_node_rename_rewrites_refs_and_templates', () => {
    const out = renameNodeInConfig(config, 'llm', 'writer') as typeof config;
    expect(out.template).toBe('Hi {{ writer.answer }} and {{ writer.usage }}; llm. stays literal');
    expect(out.value).toEqual({ ref: 'writer.answer.text' });
    expect(out.other).toEqual({ ref: 'llmx.answer' });
    expect(out.list).toEqual([{ ref: 'inputs.q' }]);
  });

  it('test_node_rename_to_non_identifier_uses_nodes_form', () => {
    const out = renameNodeInConfig(config, 'llm', 'my writer') as typeof config;
    expect(out.value).toEqual({ ref: 'nodes["my writer"].answer.text' });
    expect(out.template).toContain('{{ nodes["my writer"].answer }}');
  });

  it('test_output_rename_rewrites_only_that_output', () => {
    const out = renameOutputInConfig({ a: { ref: 'code.result.x' }, b: { ref: 'code.results' }, t: '{{ code.result }} {{ code.results }}' },
      'code', 'result', 'total') as Record<string, unknown>;
    expect(out.a).toEqual({ ref: 'code.total.x' });
    expect(out.b).toEqual({ ref: 'code.results' });
    expect(out.t).toBe('{{ code.total }} {{ code.results }}');
  });

  it('test_node_reads_finds_refs_and_template_reads', () => {
    expect(nodeReads({ config }, 'llm')).toBe(true);
    expect(nodeReads({ config }, 'llmx')).toBe(true);
    expect(nodeReads({ config: { t: 'no {{ inputs.llm }} here' } }, 'llm')).toBe(false);
  });
});
