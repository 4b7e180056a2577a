import { describe, expect, it } from 'vitest';
import { ZH_CN_PROBLEMS } from '../i18n/problems';
import { lastField, problemText } from './problemText';

const places = {
  nodeTitle: (id: string) => (id === 'c' ? '分类' : id),
  fieldLabel: (_node: string | null, name: string) => ({ url: 'URL 地址', categories: '分类', text: '回复内容' }[name] ?? name),
};

describe('problemText', () => {
  it('test_english_is_the_server_message', () => {
    const p = { code: 'missing_config', message: 'required field is missing', node_id: 'h', path: 'config.url' };
    expect(problemText(p, 'en', places)).toBe('required field is missing');
  });

  it('test_chinese_words_the_code_with_the_field_label_and_quoted_names', () => {
    expect(problemText({ code: 'missing_config', message: 'required field is missing', node_id: 'h', path: 'config.url' },
      'zh-CN', places)).toBe('缺少必填字段「URL 地址」');
    expect(problemText({ code: 'unknown_template_name', node_id: 's', path: 'config.text',
      message: "template uses 'nope', which is not a node id, a bound variable or inputs/sys/vars/nodes" }, 'zh-CN', places))
      .toBe("模板使用了 'nope'，它不是节点 ID、绑定变量或 inputs/sys/vars/nodes");
    expect(problemText({ code: 'invalid_config', node_id: 'c', path: 'config',
      message: "category ids must be unique: ['a']" }, 'zh-CN', places)).toBe("「配置」中的 ID 必须唯一：'a'");
    expect(problemText({ code: 'invalid_config', node_id: 'c', path: 'config.max_retries',
      message: 'must be at most 10 (got 99)' }, 'zh-CN', places)).toBe('「max_retries」必须至多为 10');
  });

  it('test_no_english_sentence_for_an_unknown_code_or_phrasing', () => {
    const text = problemText({ code: 'brand_new', message: 'Something went wrong in a way never seen', node_id: 'c',
      path: 'config.text' }, 'zh-CN', places);
    expect(text).toBe('「回复内容」有问题（brand_new）');
    const detail = problemText({ code: 'invalid_config', message: 'the prompt is odd', node_id: 'c', path: 'config.text' },
      'zh-CN', places);
    expect(detail).toBe('「回复内容」的取值无效');
  });

  it('test_every_template_is_free_of_english_words', () => {
    for (const [code, template] of Object.entries(ZH_CN_PROBLEMS)) {
      const words = template.replace(/\{\w+\}/g, '').replace(/inputs\/sys\/vars\/nodes|API|ID|URL/g, '');
      expect(words, code).not.toMatch(/[A-Za-z]{3,}/);
    }
  });

  it('test_last_field_of_a_path', () => {
    expect(lastField('config.cases[0].conditions[1].left')).toBe('left');
    expect(lastField(null)).toBe('');
  });
});

describe('problemText of the variable scopes in zh-CN', () => {
  it('words an undeclared environment variable and an unset secret in Chinese', () => {
    const unknown = problemText({ code: 'unknown_env', message: 'env.TOKN is not declared (did you mean \'TOKEN\') (declared: TOKEN)',
      node_id: 'h', path: 'config.headers' }, 'zh-CN', places);
    expect(unknown).toContain('环境变量');
    expect(unknown).not.toMatch(/is not declared/);
    const unset = problemText({ code: 'unset_secret', message: "secret environment variable 'TOKEN' has no value: set it",
      node_id: null, path: 'environment' }, 'zh-CN', places);
    expect(unset).toContain('TOKEN');
    expect(unset).not.toMatch(/has no value/);
  });
});
