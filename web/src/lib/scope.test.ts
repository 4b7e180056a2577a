import { describe, expect, it } from 'vitest';
import { compilerPath, configField, entriesOf, type ScopeEntry } from './scope';

describe('configField', () => {
  it('names the top-level config key of a form path', () => {
    expect(configField('config-collect')).toBe('collect');
    expect(configField('config-cases.0.conditions.1.left')).toBe('cases');
    expect(configField('config-policy-form')).toBe('policy-form');
    expect(configField(undefined)).toBeNull();
    expect(configField('other')).toBeNull();
  });
});

describe('entriesOf', () => {
  const entries: ScopeEntry[] = [
    { path: 'it.item', group: 'node', node_id: 'it', output: 'item' },
    { path: 'inputs.q', group: 'inputs' },
    { path: 'conversation.count', group: 'conversation', type: 'number' },
  ];
  it('keeps one group, filtered by the query', () => {
    expect(entriesOf(entries, 'node', '').map((e) => e.path)).toEqual(['it.item']);
    expect(entriesOf(entries, 'conversation', 'COU').map((e) => e.path)).toEqual(['conversation.count']);
    expect(entriesOf(entries, 'inputs', 'zzz')).toEqual([]);
  });
});

describe('compilerPath', () => {
  it('spells list items as the compiler does', () => {
    expect(compilerPath('config-collect')).toBe('config.collect');
    expect(compilerPath('config-cases.0.conditions.1.left')).toBe('config.cases[0].conditions[1].left');
  });

});
