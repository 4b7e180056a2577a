/**
 * Node titles for the run views: a node is shown by its title (the `name` the builder
 * gave it) with its id as secondary text; a node without a title is shown by its id.
 * Titles come from the open draft, whose ids are those of its runs (a node renamed
 * since a past run keeps its id; one deleted since shows its id).
 */
import { useMemo } from 'react';
import { isFlowNode } from '../lib/serialize';
import { useEditor } from '../store/editor';

export type Titles = Record<string, string>;

/** node id -> title, for the nodes of the draft that have one. */
export function useNodeTitles(): Titles {
  const nodes = useEditor((s) => s.nodes);
  return useMemo(() => {
    const out: Titles = {};
    for (const n of nodes) if (isFlowNode(n) && n.data.node.name) out[n.id] = n.data.node.name;
    return out;
  }, [nodes]);
}

/** The title of `nodeId` (its id when it has none). */
export function titleOf(titles: Titles, nodeId: string | null | undefined): string {
  if (!nodeId) return '';
  return titles[nodeId] || nodeId;
}

/** `text` with a leading `node_id: ` (how run errors name their node) replaced by the node's title. */
export function withTitle(titles: Titles, text: string, nodeId?: string | null): string {
  if (nodeId && titles[nodeId] && text.startsWith(`${nodeId}: `)) return `${titles[nodeId]}: ${text.slice(nodeId.length + 2)}`;
  return text;
}

/** A run error as the panel shows it (`node_id: message`) with the node's title in place of its id. */
export function titledError(titles: Titles, text: string): string {
  const m = /^([^:\s]+): /.exec(text);
  return m && titles[m[1]] ? withTitle(titles, text, m[1]) : text;
}

/** The title (primary) and the id (secondary, only when it differs) of a node. */
export function NodeName({ titles, nodeId }: { titles: Titles; nodeId: string }) {
  const title = titles[nodeId];
  return title && title !== nodeId
    ? <><strong className="trace-title">{title}</strong> <span className="muted trace-id">{nodeId}</span></>
    : <strong className="trace-title">{nodeId}</strong>;
}
