import { describe, expect, it } from 'vitest';
import { parseTyped, showTyped } from './convVars';

describe('parseTyped', () => {
  it('reads text by the declared type', () => {
    expect(parseTyped('number', ' 41 ')).toEqual({ ok: true, value: 41 });
    expect(parseTyped('number', 'many')).toEqual({ ok: false, error: 'number' });
    expect(parseTyped('string', ' a ')).toEqual({ ok: true, value: ' a ' });
    expect(parseTyped('boolean', 'true')).toEqual({ ok: true, value: true });
    expect(parseTyped('array', '[1, "a"]')).toEqual({ ok: true, value: [1, 'a'] });
    expect(parseTyped('array', '{}')).toEqual({ ok: false, error: 'array' });
    expect(parseTyped('object', '{"a": 1}')).toEqual({ ok: true, value: { a: 1 } });
    expect(parseTyped('any', 'plain words')).toEqual({ ok: true, value: 'plain words' });
    expect(parseTyped('number', '  ')).toEqual({ ok: true, value: null });
  });
  it('shows values back as they are typed', () => {
    expect(showTyped(3)).toBe('3');
    expect(showTyped('x')).toBe('x');
    expect(showTyped(null)).toBe('');
    expect(showTyped([1])).toBe('[1]');
  });
});
