import { describe, expect, it } from 'vitest';
import { tokensLabel, tokensShort } from './usage';

describe('tokensLabel', () => {
  it('test_counted_tokens_read_as_counts', () => {
    expect(tokensLabel('en', 20, 93, false)).toBe('tokens 20/93');
    expect(tokensShort('en', 20, 93, false)).toEqual({ text: '20/93' });
  });

  it('test_estimated_tokens_are_marked_in_english', () => {
    expect(tokensLabel('en', 20, 93, true)).toBe('~20/93 tokens (estimated)');
    const short = tokensShort('en', 20, 93, true);
    expect(short.text).toBe('~20/93');
    expect(short.title).toMatch(/did not report/);
  });

  it('test_estimated_tokens_are_marked_in_chinese', () => {
    expect(tokensLabel('zh-CN', 20, 93, true)).toBe('~20/93 tokens（估算）');
    expect(tokensShort('zh-CN', 20, 93, true).title).toContain('估算');
  });
});
