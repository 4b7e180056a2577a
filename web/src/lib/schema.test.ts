import { describe, expect, it } from 'vitest';
import { alternatives, initialObject, isRefSchema, nullable, resolve, startingModel, type JSONSchema } from './schema';

const root: JSONSchema = {
  $defs: {
    Ref: { properties: { ref: { type: 'string' } }, required: ['ref'] },
    Case: { properties: { id: { type: 'string', pattern: '^x' }, logic: { enum: ['and', 'or'], default: 'and' },
      conditions: { type: 'array', minItems: 1, items: { $ref: '#/$defs/Cond' } } }, required: ['id', 'conditions'] },
    Cond: { properties: { left: {}, operator: { enum: ['equals', 'gt'] } }, required: ['left', 'operator'] },
  },
  properties: {
    cases: { type: 'array', minItems: 1, items: { $ref: '#/$defs/Case' } },
    model: { type: 'string', minLength: 1 },
    temperature: { anyOf: [{ type: 'number' }, { type: 'null' }], default: null },
    question: { anyOf: [{ type: 'string' }, { $ref: '#/$defs/Ref' }], default: '{{ sys.query }}' },
  },
  required: ['cases', 'model'],
};

describe('JSON Schema helpers', () => {
  it('test_initial_object_fills_required_fields', () => {
    expect(initialObject(root, root)).toEqual({
      cases: [{ id: 'case_1', conditions: [{ left: { ref: '' }, operator: 'equals' }] }],
      model: 'model 1',
    });
  });

  it('test_singular_names_list_items', async () => {
    const { singular } = await import('./schema');
    expect(singular('cases')).toBe('case');
    expect(singular('categories')).toBe('category');
    expect(singular('options')).toBe('option');
    expect(singular('class')).toBe('class');
  });

  it('test_resolve_follows_refs', () => {
    expect(resolve({ $ref: '#/$defs/Ref' }, root).required).toEqual(['ref']);
  });

  it('test_alternatives_drop_null_and_detect_refs', () => {
    const alts = alternatives(root.properties!.question, root);
    expect(alts).toHaveLength(2);
    expect(alts.some((a) => isRefSchema(a, root))).toBe(true);
    expect(nullable(root.properties!.temperature, root)).toBe(true);
    expect(nullable(root.properties!.model, root)).toBe(false);
  });
});

describe('startingModel', () => {
  it('test_prefers_default_then_first_registry_name', () => {
    expect(startingModel(['gpt', 'default', 'z'])).toBe('default');
    expect(startingModel(['gpt', 'z'])).toBe('gpt');
    expect(startingModel([])).toBe('');
  });

  it('test_keeps_the_workflows_model_only_when_registered', () => {
    expect(startingModel(['a', 'b'], ['', 'b'])).toBe('b');
    expect(startingModel(['a', 'b'], ['model 1'])).toBe('a');
  });
});
