import { describe, expect, it } from 'vitest';
import { kindFieldHelp, kindFieldTitles, kindValueLabels, localFieldLabel, localHelp, localValueLabel, nodeFieldTitles } from './fieldLabel';

const chat = { labels: { 'zh-CN': { title: 'AI 对话', description: '一次模型调用。',
  fields: { system_prompt: '系统提示词', model: '模型' } } } };
const http = { labels: { 'zh-CN': { title: 'HTTP 请求', description: '发送请求。' } } };

describe('kindFieldTitles', () => {
  it("gives the titles of the kind's fields in the language", () => {
    expect(kindFieldTitles(chat, 'zh-CN')).toEqual({ system_prompt: '系统提示词', model: '模型' });
  });
  it('gives none for another language, a label without fields, or no kind', () => {
    expect(kindFieldTitles(chat, 'en')).toEqual({});
    expect(kindFieldTitles(http, 'zh-CN')).toEqual({});
    expect(kindFieldTitles(undefined, 'zh-CN')).toEqual({});
  });
});

describe('nodeFieldTitles', () => {
  it('gives the titles of the fields every node has in the language, none for another', () => {
    const labels = { 'zh-CN': { max_retries: '最大重试次数' } };
    expect(nodeFieldTitles(labels, 'zh-CN')).toEqual({ max_retries: '最大重试次数' });
    expect(nodeFieldTitles(labels, 'en')).toEqual({});
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

describe('enum value labels', () => {
  const ifElse = { labels: { 'zh-CN': { title: '条件分支', description: '', values: { equals: '等于', or: '或' } } } };
  it("gives the kind's value labels in the language, none elsewhere", () => {
    expect(kindValueLabels(ifElse, 'zh-CN')).toEqual({ equals: '等于', or: '或' });
    expect(kindValueLabels(ifElse, 'en')).toEqual({});
    expect(kindValueLabels(http, 'zh-CN')).toEqual({});
  });
  it('shows the label, else the raw value (numbers, unknown or inherited names)', () => {
    const labels = kindValueLabels(ifElse, 'zh-CN');
    expect(localValueLabel('equals', labels)).toBe('等于');
    expect(localValueLabel('regex', labels)).toBe('regex');
    expect(localValueLabel(3, labels)).toBe('3');
    expect(localValueLabel('toString', labels)).toBe('toString');
  });
});

describe('field help', () => {
  it('test_help_in_the_ui_language_else_english', () => {
    const kind = { labels: { 'zh-CN': { title: '', description: '', help: { 'seconds per attempt': '每次尝试的时限（秒）' } } } };
    const help = kindFieldHelp(kind as never, 'zh-CN');
    expect(localHelp('seconds per attempt', help)).toBe('每次尝试的时限（秒）');
    expect(localHelp('something new', help)).toBe('something new');
    expect(kindFieldHelp(kind as never, 'en')).toEqual({});
  });
});
