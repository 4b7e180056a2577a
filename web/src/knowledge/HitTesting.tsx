/**
 * Hit testing: what a knowledge retrieval node would find in this dataset for a query,
 * with the node's own options (mode, top k, score threshold): the ranked chunks with
 * their score (and each recall pass's), source document and heading path, and what the
 * search could not do as asked (a semantic search of a full-text-only dataset...).
 */
import { useState, type FormEvent } from 'react';
import { useT } from '../i18n';
import { kbApi, type Dataset, type DatasetSearchResult, type SearchMode } from './api';

const MODES: SearchMode[] = ['semantic', 'full_text', 'hybrid'];

export function HitTesting({ dataset }: { dataset: Dataset }) {
  const t = useT();
  const [query, setQuery] = useState('');
  const [mode, setMode] = useState<SearchMode>(dataset.embedding_model ? 'hybrid' : 'full_text');
  const [topK, setTopK] = useState(5);
  const [threshold, setThreshold] = useState(0);
  const [result, setResult] = useState<DatasetSearchResult | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const passLabel = (pass: string) => {
    const key = `knowledge.pass.${pass}` as 'knowledge.pass.semantic';
    const text = t(key);
    return text === key ? pass : text;
  };
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    try {
      setResult(await kbApi.search(dataset.id, { query, mode, top_k: topK, score_threshold: threshold }));
      setError(null);
    } catch (err) {
      setError((err as Error).message);
    } finally {
      setBusy(false);
    }
  };
  return (
    <section className="hit-testing" data-testid="hit-testing">
      <form onSubmit={submit}>
        <textarea data-testid="hit-query" rows={3} value={query} placeholder={t('knowledge.hits.query')}
          onChange={(e) => setQuery(e.target.value)} />
        <div className="row">
          <label>{t('knowledge.hits.mode')}{' '}
            <select data-testid="hit-mode" value={mode} onChange={(e) => setMode(e.target.value as SearchMode)}>
              {MODES.map((m) => <option key={m} value={m} disabled={m !== 'full_text' && !dataset.embedding_model}>
                {t(`knowledge.mode.${m}` as 'knowledge.mode.hybrid')}</option>)}
            </select></label>
          <label>{t('knowledge.hits.topK')}{' '}
            <input data-testid="hit-top-k" type="number" min={1} max={200} value={topK}
              onChange={(e) => setTopK(Math.max(1, Number(e.target.value) || 1))} /></label>
          <label>{t('knowledge.hits.threshold')}{' '}
            <input data-testid="hit-threshold" type="number" min={0} max={1} step={0.05} value={threshold}
              onChange={(e) => setThreshold(Math.min(1, Math.max(0, Number(e.target.value) || 0)))} /></label>
          <button type="submit" className="primary" data-testid="hit-search" disabled={busy || !query.trim()}>
            {t('knowledge.hits.search')}</button>
        </div>
      </form>
      {error && <div className="error" role="alert">{error}</div>}
      {result && (
        <div data-testid="hit-results">
          {result.notes?.map((n, i) => <div key={i} className="warning small" data-testid="hit-note">{n}</div>)}
          {result.hits.length === 0 && <p className="muted" data-testid="hit-none">{t('knowledge.hits.none')}</p>}
          <ol className="hit-list">
            {result.hits.map((h, i) => (
              <li key={h.chunk_id} className="hit" data-testid={`hit-${i}`}>
                <div className="row">
                  <span className="badge ok" data-testid="hit-score">{h.score.toFixed(3)}</span>
                  <strong data-testid="hit-source">{h.source_name}</strong>
                  {h.heading_path?.length ? <span className="muted small">{h.heading_path.join(' › ')}</span> : null}
                  <span className="spacer" />
                  <span className="muted small">{Object.entries(h.scores ?? {}).map(([pass, s]) =>
                    `${passLabel(pass)} ${s.toFixed(3)}`).join(' · ')}</span>
                </div>
                <div className="chunk-text" data-testid="hit-text">{h.text}</div>
              </li>
            ))}
          </ol>
        </div>
      )}
    </section>
  );
}
