/**
 * A compile problem as the builder reads it, in the UI language: English is the
 * server's message; another language words the problem's `code` from its own templates
 * (i18n/problems.ts) with the node's title, the field's label in that language and the
 * names and numbers the message quotes, so no English sentence reaches a builder who
 * works in Chinese. Pure: the lookups of titles and labels are passed in.
 */
import { ZH_CN_DETAIL_FALLBACK, ZH_CN_DETAILS, ZH_CN_FALLBACK, ZH_CN_PROBLEMS } from '../i18n/problems';

export interface ProblemLike {
  code: string;
  message: string;
  node_id?: string | null;
  path?: string | null;
}

export interface Places {
  /** The title of node `id` (its name, else the id). */
  nodeTitle: (id: string) => string;
  /** The label of field `name` of node `nodeId` in the UI language (the name when unknown). */
  fieldLabel: (nodeId: string | null, name: string) => string;
}

/** The last field name of a problem path (`config.cases[0].conditions[1].left` -> `left`);
 * '' for the node's whole config. */
export function lastField(path: string | null | undefined): string {
  const names = (path ?? '').split('.').map((p) => p.replace(/\[\d+\]/g, '')).filter(Boolean);
  const last = names[names.length - 1] ?? '';
  return names.length === 1 && last === 'config' ? '' : last;
}

function fill(template: string, params: Record<string, string>): string {
  return template.replace(/\{(\w+)\}/g, (_all, key: string) => params[key] ?? '');
}

/** The quoted names ('x') and numbers of an English message, in order. */
function pieces(message: string): { quoted: string[]; numbers: string[] } {
  const quoted = [...message.matchAll(/'([^']*)'/g)].map((m) => `'${m[1]}'`);
  const numbers = [...message.replace(/'[^']*'/g, '').matchAll(/-?\d+(?:\.\d+)?/g)].map((m) => m[0]);
  return { quoted, numbers };
}

/** The words of a field validation message (`invalid_config`), in Simplified Chinese. */
function zhDetail(message: string, params: Record<string, string>): string {
  for (const [pattern, template] of ZH_CN_DETAILS) if (pattern.test(message)) return fill(template, params);
  return ZH_CN_DETAIL_FALLBACK + (params.quoted ? `（${params.quoted}）` : '');
}

/** What the builder reads for `p` in `lang`. */
export function problemText(p: ProblemLike, lang: string, places: Places): string {
  if (lang !== 'zh-CN') return p.message;
  const { quoted, numbers } = pieces(p.message);
  const name = lastField(p.path);
  const params: Record<string, string> = {
    code: p.code,
    node: p.node_id ? places.nodeTitle(p.node_id) : '',
    field: name ? places.fieldLabel(p.node_id ?? null, name) : '配置',
    quoted: quoted.join('、'),
  };
  quoted.forEach((q, i) => { params[`q${i}`] = q; });
  numbers.forEach((n, i) => { params[`n${i}`] = n; });
  params.detail = zhDetail(p.message, params);
  return fill(ZH_CN_PROBLEMS[p.code] ?? ZH_CN_FALLBACK, params);
}
