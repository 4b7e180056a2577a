/**
 * Sources as a builder reads them: `[n] source document` (with score and heading path
 * when known), the quoted chunk text opened on demand. Used under a chat answer (its
 * citations) and in the trace (a retrieval node's chunks, a chat node's citations).
 */
import './knowledge.css';
import { useT } from '../i18n';
import type { Citation } from '../run/events';

/** `open`: every quote shown at once (the trace, itself inside an opened row), else each
 * opened on demand (under a chat answer). */
export function Citations({ items, testId, title, open = false }: { items: Citation[]; testId: string; title?: string;
  open?: boolean }) {
  const t = useT();
  if (!items.length) return null;
  return (
    <div className="citations" data-testid={testId}>
      <div className="citations-title">{title ?? t('knowledge.citations.title', { count: items.length })}</div>
      {items.map((c) => {
        const key = `${c.citation_id}/${c.chunk_id ?? ''}`;
        const head = (
          <>
            <span className="citation-id">[{c.citation_id}]</span>{' '}
            <span data-testid="citation-source">{c.source_name || t('knowledge.citations.unknown')}</span>
            {c.heading_path?.length ? <span className="muted small"> · {c.heading_path.join(' › ')}</span> : null}
            {c.score !== undefined ? <span className="muted small"> · {t('knowledge.citations.score', { score: c.score.toFixed(3) })}</span> : null}
          </>
        );
        const quote = <blockquote className="chunk-text" data-testid="citation-text">{c.text || t('knowledge.citations.noText')}</blockquote>;
        return open ? (
          <div key={key} className="citation" data-testid={`${testId}-${c.citation_id}`}><div>{head}</div>{quote}</div>
        ) : (
          <details key={key} className="citation" data-testid={`${testId}-${c.citation_id}`}><summary>{head}</summary>{quote}</details>
        );
      })}
    </div>
  );
}
