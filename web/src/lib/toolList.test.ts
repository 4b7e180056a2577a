import { describe, expect, it } from 'vitest';
import { listedTools } from './toolList';

describe('listedTools', () => {
  it('test_every_kind_of_tool_is_listed_by_the_name_the_model_sees', () => {
    const tools = listedTools({
      builtin_tools: [{ name: 'current_time' }, { name: 'calculator', alias: 'calc' }],
      http_tools: [{ operationId: 'get_weather', base_url: 'https://x' }],
      openapi: { servers: [{ url: 'https://api' }], paths: { '/a': { get: { operationId: 'list_a' }, parameters: [] } } },
      workflow_tools: [{ workflow: 'summarize' }, { workflow: 'x', name: 'translate' }],
      dataset_tools: [{ datasets: ['kb'] }],
      mcp_servers: [{ name: 'files', tools: ['read', 'list'] }, { name: 'web' }],
    });
    expect(tools.map((t) => `${t.source}:${t.name}`)).toEqual([
      'builtin:current_time', 'builtin:calc', 'http:get_weather', 'http:list_a', 'workflow:summarize',
      'workflow:translate', 'dataset:search_knowledge', 'mcp:files: read, list', 'mcp:web: *']);
  });

  it('test_a_node_without_tools_lists_none', () => {
    expect(listedTools({ model: 'default' })).toEqual([]);
    expect(listedTools(undefined)).toEqual([]);
  });
});
