/** The chunks ingestion made of one document, a page at a time, in position order:
 * each with its kind, heading path, size in tokens, and text (a QA pair's question too). */
import { useEffect, useState } from 'react';
import { useT } from '../i18n';
import { Dialog } from '../panels/Dialog';
import { kbApi, type ChunkPage } from './api';
import { chunkPage } from './documents';

const PAGE_SIZE = 10;

export function ChunkPreview({ datasetId, documentId, name, onClose }: { datasetId: string; documentId: string;
  name: string; onClose: () => void }) {
  const t = useT();
  const [page, setPage] = useState(0);
  const [data, setData] = useState<ChunkPage | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    let live = true;
    kbApi.chunks(datasetId, documentId, page * PAGE_SIZE, PAGE_SIZE)
      .then((p) => { if (live) { setData(p); setError(null); } }, (e: Error) => { if (live) setError(e.message); });
    return () => { live = false; };
  }, [datasetId, documentId, page]);
  const range = chunkPage(page, PAGE_SIZE, data?.total ?? 0);
  return (
    <Dialog title={t('knowledge.chunks.title', { name })} onClose={onClose} testId="chunk-preview">
      {error && <div className="error" role="alert">{error}</div>}
      {!data && !error && <p className="muted">{t('common.loading')}</p>}
      {data && data.total === 0 && <p className="muted">{t('knowledge.chunks.none')}</p>}
      {data && data.total > 0 && (
        <>
          <div className="row">
            <span className="muted" data-testid="chunk-range">
              {t('knowledge.chunks.range', { from: range.from, to: range.to, total: data.total })}</span>
            <span className="spacer" />
            <button type="button" className="small" data-testid="chunk-prev" disabled={page === 0}
              onClick={() => setPage(page - 1)}>{t('knowledge.chunks.prev')}</button>
            <button type="button" className="small" data-testid="chunk-next" disabled={page >= range.pages - 1}
              onClick={() => setPage(page + 1)}>{t('knowledge.chunks.next')}</button>
          </div>
          <ol className="chunk-list" start={range.from}>
            {data.chunks.map((c) => (
              <li key={c.id} data-testid={`chunk-${c.position}`}>
                <div className="muted small">
                  #{c.position + 1}{c.kind !== 'text' ? ` · ${t(`knowledge.chunks.kind.${c.kind}` as 'knowledge.chunks.kind.qa')}` : ''}
                  {c.heading_path?.length ? ` · ${c.heading_path.join(' › ')}` : ''}
                  {' · '}{t('knowledge.chunks.tokens', { count: c.tokens ?? 0 })}
                </div>
                {c.kind === 'qa' && <div className="chunk-question">{c.search_text}</div>}
                <div className="chunk-text">{c.text}</div>
              </li>
            ))}
          </ol>
        </>
      )}
    </Dialog>
  );
}
