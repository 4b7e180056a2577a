import { describe, expect, it } from 'vitest';
import { kindText } from './kindLabel';

const kind = {
  title: 'Question classifier', description: 'Routes the graph by category.',
  labels: { 'zh-CN': { title: '问题分类', description: '按类别选择分支。' } },
};

describe('kindText', () => {
  it('gives the label of the language when the catalog has one', () => {
    expect(kindText(kind, 'zh-CN')).toEqual({ title: '问题分类', description: '按类别选择分支。' });
  });
  it('falls back to English for a language without labels', () => {
    expect(kindText(kind, 'fr')).toEqual({ title: 'Question classifier', description: 'Routes the graph by category.' });
    expect(kindText({ title: 'Start', description: 'Entry.' }, 'zh-CN').title).toBe('Start');
  });
});
