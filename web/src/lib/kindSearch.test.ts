import { describe, expect, it } from 'vitest';
import { kindMatches, type SearchableKind } from './kindSearch';

// Trimmed from the real catalog (GET /v1/node-kinds, built from nodes/catalog.py and the
// config models in schemas/): titles, descriptions, categories, zh-CN labels and the
// config fields as the server states them.
const ifElse: SearchableKind = {
  kind: 'if_else', title: 'If / else', category: 'logic',
  description: 'Checks the cases in order and takes the branch of the first one that matches; when none matches, the Else branch.',
  labels: { 'zh-CN': { title: '条件分支', description: '按顺序检查各条件，走第一个满足的分支，否则走 else 分支。',
    fields: { cases: '分支', logic: '条件关系', conditions: '条件', operator: '运算符' } } },
  config_schema: {
    properties: { cases: { title: 'Cases', type: 'array', items: { $ref: '#/$defs/Case' } } },
    $defs: {
      Case: { properties: { id: { title: 'Id' }, logic: { title: 'Logic' }, conditions: { title: 'Conditions', type: 'array' } } },
      Condition: { properties: { left: { title: 'Left' }, operator: { $ref: '#/$defs/ConditionOp' }, right: { title: 'Right' } } },
    },
  },
};
const http: SearchableKind = {
  kind: 'http_request', title: 'HTTP request', category: 'integration',
  description: 'Makes an HTTP request; the URL, headers, query values, form and raw body are templates.',
  labels: { 'zh-CN': { title: 'HTTP 请求', description: '发送 HTTP 请求；URL、请求头、查询参数和请求体都可以使用模板。',
    fields: { method: '请求方法', url: 'URL' } } },
  config_schema: { properties: { method: { title: 'Method' }, url: { title: 'Url' }, headers: { title: 'Headers' } } },
};
const userSelect: SearchableKind = {
  kind: 'user_select', title: 'User select', category: 'human',
  description: 'Pauses the run with a question and options; the branch of the option the person picks is taken.',
  labels: { 'zh-CN': { title: '用户选择', description: '暂停运行并给出说明和选项；用户选择的选项决定分支。' } },
  config_schema: { properties: { description: { title: 'Description' }, options: { title: 'Options' } } },
};
const kinds = [ifElse, http, userSelect];
const found = (query: string, lang = 'en', category: (c: string) => string = () => '') =>
  kinds.filter((k) => kindMatches(k, query, lang, category(k.category))).map((k) => k.kind);

describe('kindMatches', () => {
  it('finds If / else by "condition" (its cases hold conditions), in any case and with spaces around', () => {
    expect(found('condition')).toEqual(['if_else']);
    expect(found('  CONDITION ')).toEqual(['if_else']);
  });

  it('matches the id, the title and the description in English', () => {
    expect(found('if_else')).toEqual(['if_else']);
    expect(found('if else')).toEqual(['if_else']);
    expect(found('headers')).toEqual(['http_request']);
    expect(found('person picks')).toEqual(['user_select']);
  });

  it('matches the category id and its name in the UI language', () => {
    expect(found('integration')).toEqual(['http_request']);
    const zh = (c: string) => ({ logic: '逻辑', integration: '集成', human: '人工输入' })[c] ?? '';
    expect(found('逻辑', 'zh-CN', zh)).toEqual(['if_else']);
  });

  it('matches the labels of the UI language and still the English text', () => {
    expect(found('条件', 'zh-CN')).toEqual(['if_else']);
    expect(found('请求', 'zh-CN')).toEqual(['http_request']);
    expect(found('condition', 'zh-CN')).toEqual(['if_else']);
    expect(found('条件', 'en')).toEqual([]);
  });

  it('needs every word of the query; an empty query matches every kind', () => {
    expect(found('http templates')).toEqual(['http_request']);
    expect(found('http condition')).toEqual([]);
    expect(found('')).toEqual(['if_else', 'http_request', 'user_select']);
    expect(found('zzz')).toEqual([]);
  });
});
