import { describe, expect, it } from 'vitest';
import { inputValues, type DeclaredInput } from './Inputs';

const declared: DeclaredInput[] = [
  { name: 'name', type: 'string', required: true },
  { name: 'count', type: 'number' },
  { name: 'flag', type: 'boolean' },
  { name: 'tags', type: 'array[string]' },
  { name: 'meta', type: 'object' },
];

describe('inputValues', () => {
  it('test_values_take_the_declared_types', () => {
    expect(inputValues(declared, { name: 'Ada', count: '3', flag: true, tags: '["a","b"]', meta: '{"k":1}' }))
      .toEqual({ name: 'Ada', count: 3, flag: true, tags: ['a', 'b'], meta: { k: 1 } });
  });

  it('test_empty_fields_are_left_out_so_defaults_apply', () => {
    expect(inputValues(declared, { name: '', count: '' })).toEqual({});
  });

  it('test_invalid_json_names_the_input', () => {
    expect(() => inputValues(declared, { meta: '{oops' })).toThrow('meta: not valid JSON');
  });
});
