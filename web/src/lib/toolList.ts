/**
 * The tools a tool-calling node (tool call, agent) offers the model besides its graph
 * tools (which are body nodes and get a handle each on the card): builtin tools,
 * HTTP operations (listed or from an OpenAPI document), other workflows, knowledge
 * searches and MCP servers, each with the name the model sees, so the card says what
 * the node can do without opening it. Pure: read from the node's config.
 */
import type { JsonObject } from './workflow';

export interface ListedTool {
  /** The name the model calls (an MCP server: its label, its tools after a colon). */
  name: string;
  /** builtin, http, workflow, dataset or mcp. */
  source: 'builtin' | 'http' | 'workflow' | 'dataset' | 'mcp';
}

const HTTP_METHODS = new Set(['get', 'post', 'put', 'patch', 'delete', 'head', 'options']);

function items(value: unknown): JsonObject[] {
  return Array.isArray(value) ? value.filter((x): x is JsonObject => !!x && typeof x === 'object' && !Array.isArray(x)) : [];
}

function text(value: unknown): string {
  return typeof value === 'string' ? value.trim() : '';
}

/** The operationIds of an OpenAPI-style document's paths. */
function openapiOperations(doc: unknown): string[] {
  const paths = (doc as { paths?: unknown } | null)?.paths;
  if (!paths || typeof paths !== 'object') return [];
  const out: string[] = [];
  for (const item of Object.values(paths as Record<string, unknown>)) {
    if (!item || typeof item !== 'object') continue;
    for (const [method, op] of Object.entries(item as Record<string, unknown>)) {
      const id = HTTP_METHODS.has(method.toLowerCase()) ? text((op as { operationId?: unknown })?.operationId) : '';
      if (id) out.push(id);
    }
  }
  return out;
}

/** The node's non-graph tools in the order the model gets them. */
export function listedTools(config: JsonObject | undefined): ListedTool[] {
  if (!config) return [];
  const out: ListedTool[] = [];
  for (const t of items(config.builtin_tools)) {
    const name = text(t.alias) || text(t.name);
    if (name) out.push({ name, source: 'builtin' });
  }
  for (const t of items(config.http_tools)) {
    const name = text(t.operationId);
    if (name) out.push({ name, source: 'http' });
  }
  for (const name of openapiOperations(config.openapi)) out.push({ name, source: 'http' });
  for (const t of items(config.workflow_tools)) {
    const name = text(t.name) || text(t.workflow);
    if (name) out.push({ name, source: 'workflow' });
  }
  for (const t of items(config.dataset_tools)) out.push({ name: text(t.name) || 'search_knowledge', source: 'dataset' });
  for (const s of items(config.mcp_servers)) {
    const label = text(s.name);
    if (!label) continue;
    const tools = Array.isArray(s.tools) ? s.tools.map(text).filter(Boolean) : null;
    out.push({ name: tools ? `${label}: ${tools.join(', ')}` : `${label}: *`, source: 'mcp' });
  }
  return out;
}
