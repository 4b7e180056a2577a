/** In the trace: the chunks a knowledge retrieval node run found (its `chunks` output)
 * and the sources a chat node run's answer cites (its `citations` output), readable
 * (source, score, heading path, quoted text) above the raw outputs. */
import { useT } from '../i18n';
import type { NodeRunOut } from '../api/types';
import { Citations } from './Citations';
import { messageCitations, retrievedChunks } from './citations';

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null;
}

export function KnowledgeTrace({ nodeRun }: { nodeRun: NodeRunOut }) {
  const t = useT();
  const chunks = retrievedChunks(nodeRun.outputs);
  const cited = nodeRun.outputs?.citations;
  const citations = Array.isArray(cited)
    ? messageCitations(cited.filter(isRecord).map((c) => ({ type: 'citation', data: c }))) : [];
  return (
    <>
      {nodeRun.kind === 'knowledge_retrieval' && nodeRun.status === 'succeeded' && !chunks.length && (
        <div className="muted small" data-testid={`trace-chunks-${nodeRun.node_id}`}>{t('knowledge.trace.noChunks')}</div>
      )}
      <Citations items={chunks} testId={`trace-chunks-${nodeRun.node_id}`}
        title={t('knowledge.trace.chunks', { count: chunks.length })} open />
      <Citations items={citations} testId={`trace-citations-${nodeRun.node_id}`} open />
    </>
  );
}
