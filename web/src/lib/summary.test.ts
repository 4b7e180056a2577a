import { describe, expect, it } from 'vitest';
import { translate } from '../i18n';
import { nodeSummary, SUMMARY_MAX } from './summary';

// Config schemas trimmed from the real catalog (GET /v1/node-kinds): the branch lists'
// items describe their `id` as the output handle, as the server's models do.
const chat = { config_schema: { properties: { model: { title: 'Model', type: 'string' }, system_prompt: { type: 'string' } } } };
const classify = {
  config_schema: {
    properties: { model: { title: 'Model', type: 'string' },
      categories: { title: 'Categories', type: 'array', items: { $ref: '#/$defs/Category' } } },
    $defs: { Category: { description: 'A class of question. ``id`` is stable (the output handle and what the model answers).',
      properties: { id: { type: 'string' }, name: { type: 'string' } } } },
  },
  labels: { 'zh-CN': { title: '问题分类', description: '', fields: { model: '模型', categories: '分类' } } },
};
const ifElse = {
  config_schema: {
    properties: { cases: { title: 'Cases', type: 'array', items: { $ref: '#/$defs/Case' } } },
    $defs: { Case: { description: "One branch of an if-else: its ``id`` is the output handle taken when it matches.",
      properties: { id: { type: 'string' }, conditions: { type: 'array' } } } },
  },
};
const http = {
  config_schema: { properties: { method: { default: 'GET', enum: ['GET', 'POST'], type: 'string' }, url: { type: 'string' },
    headers: { type: 'object' } } },
};
const endKind = { config_schema: { properties: { outputs: { type: 'array', items: { properties: { name: {} } } } } } };

const en = (key: 'node.summary.count', params: Record<string, string | number>) => translate('en', key, params);
const zh = (key: 'node.summary.count', params: Record<string, string | number>) => translate('zh-CN', key, params);

describe('nodeSummary', () => {
  it('shows the model of a node that has one', () => {
    expect(nodeSummary({ model: 'gpt-4o-mini', system_prompt: 'Be brief' }, chat, 'en', en)).toBe('gpt-4o-mini');
  });

  it('counts the branch lists, named by the field, in the UI language', () => {
    const config = { cases: [{ id: 'a', conditions: [] }, { id: 'b', conditions: [] }, { id: 'c', conditions: [] }] };
    expect(nodeSummary(config, ifElse, 'en', en)).toBe('3 cases');
    expect(nodeSummary({ cases: [{ id: 'a' }] }, ifElse, 'en', en)).toBe('1 case');
    const cats = { model: 'gpt-4o', categories: [{ id: 'a' }, { id: 'b' }, { id: 'c' }, { id: 'd' }] };
    expect(nodeSummary(cats, classify, 'en', en)).toBe('gpt-4o · 4 categories');
    expect(nodeSummary(cats, classify, 'zh-CN', zh)).toBe('gpt-4o · 4 个分类');
  });

  it('shows the method (the schema default when unset) and the URL without its query string or credentials', () => {
    expect(nodeSummary({ method: 'post', url: 'https://api.example.com/v1/orders' }, http, 'en', en))
      .toBe('POST api.example.com/v1/orders');
    expect(nodeSummary({ url: 'https://user:pw@example.com/x?api_key=abc#top', headers: { Authorization: 'Bearer t' } },
      http, 'en', en)).toBe('GET example.com/x');
  });

  it('names the datasets a knowledge search reads', () => {
    const search = { config_schema: { properties: { datasets: { type: 'array', items: { type: 'string' } } } } };
    expect(nodeSummary({ datasets: ['handbook', 'faq'], top_k: 5 }, search, 'en', en)).toBe('handbook, faq');
    expect(nodeSummary({ datasets: [] }, search, 'en', en)).toBe('');
    const names: Record<string, string> = { ds_1a: 'Handbook' };
    expect(nodeSummary({ datasets: ['ds_1a', 'ds_gone'] }, search, 'en', en, (id) => names[id]))
      .toBe('Handbook, ds_gone');
  });

  it('never shows a value holding a secret reference, nor header values', () => {
    const text = nodeSummary({ url: 'https://example.com/{{secret:token}}', headers: { 'X-Key': 'k-123' } }, http, 'en', en);
    expect(text).toBe('');
    expect(nodeSummary({ model: '{{ secret:model }}' }, chat, 'en', en)).toBe('');
  });

  it('cuts a long summary with an ellipsis', () => {
    const text = nodeSummary({ url: `https://example.com/${'a'.repeat(80)}` }, http, 'en', en);
    expect(text.length).toBe(SUMMARY_MAX);
    expect(text.endsWith('…')).toBe(true);
    expect(text.startsWith('GET example.com/aaa')).toBe(true);
  });

  it('says nothing for a node without a model, a request or branches, or without its kind', () => {
    expect(nodeSummary({ outputs: [{ name: 'x' }] }, endKind, 'en', en)).toBe('');
    expect(nodeSummary({ cases: [] }, ifElse, 'en', en)).toBe('');
    expect(nodeSummary({ model: 'm' }, undefined, 'en', en)).toBe('');
    expect(nodeSummary(undefined, chat, 'en', en)).toBe('');
  });
});
