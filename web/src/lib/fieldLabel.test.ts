import { describe, expect, it } from 'vitest';
import { kindFieldTitles, localFieldLabel } from './fieldLabel';
import type { JSONSchema } from './schema';

const chatSchema: JSONSchema = { properties: { system_prompt: { title: 'System Prompt' }, model: { title: 'Model' } } };
const httpSchema: JSONSchema = { properties: { url: { title: 'Url' } } };
const kinds = [
  { config_schema: chatSchema, labels: { 'zh-CN': { title: 'AI 对话', description: '一次模型调用。',
    fields: { system_prompt: '系统提示词', model: '模型' } } } },
  { config_schema: httpSchema, labels: { 'zh-CN': { title: 'HTTP 请求', description: '发送请求。' } } },
];

describe('kindFieldTitles', () => {
  it("gives the titles of the kind whose config schema the form shows, in the language", () => {
    expect(kindFieldTitles(kinds, chatSchema, 'zh-CN')).toEqual({ system_prompt: '系统提示词', model: '模型' });
  });
  it('gives none for another language, a label without fields, or a schema of no kind', () => {
    expect(kindFieldTitles(kinds, chatSchema, 'en')).toEqual({});
    expect(kindFieldTitles(kinds, httpSchema, 'zh-CN')).toEqual({});
    // An equal copy is not the kind's schema (the policy form is built from another schema).
    expect(kindFieldTitles(kinds, { ...chatSchema }, 'zh-CN')).toEqual({});
    expect(kindFieldTitles([], chatSchema, 'zh-CN')).toEqual({});
  });
});

describe('localFieldLabel', () => {
  const titles = { system_prompt: '系统提示词' };
  it('uses the title in the language when there is one', () => {
    expect(localFieldLabel('system_prompt', { title: 'System Prompt' }, titles)).toBe('系统提示词');
  });
  it('falls back to the English label: the schema title, else the name with spaces', () => {
    expect(localFieldLabel('max_tokens', { title: 'Max Tokens' }, titles)).toBe('Max Tokens');
    expect(localFieldLabel('base_url', {}, titles)).toBe('Base url');
    expect(localFieldLabel('toString', {}, {})).toBe('ToString');
  });
});
