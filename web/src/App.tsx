/**
 * The application shell: the API key gate, the header (language switch, key), and
 * either the workflow list, the editor of one workflow (`#/w/<id>` in the address) or
 * the Knowledge section (`#/knowledge`, the datasets).
 * the "Model providers" page (`#/providers`).
 */
import { useCallback, useEffect, useState } from 'react';
import { getApiKey, setApiKey } from './api/client';
import { Editor } from './canvas/Editor';
import { languages, setLanguage, useLanguage, useT, type Language } from './i18n';
import { KeyPrompt } from './panels/KeyPrompt';
import { WorkflowList } from './panels/WorkflowList';
import { KnowledgePage } from './knowledge/KnowledgePage';
import { ProvidersPage } from './providers/ProvidersPage';
import { knowledgeHref, PROVIDERS_HASH, useKnowledgeRoute, useProvidersRoute, useRoute } from './route';
import { useCatalog } from './store/catalog';

export function App() {
  const t = useT();
  const [key, setKey] = useState(getApiKey());
  const lang = useLanguage((s) => s.lang);
  const route = useRoute();
  const knowledge = useKnowledgeRoute();
  const providersPage = useProvidersRoute();
  const catalogStatus = useCatalog((s) => s.status);
  const catalogError = useCatalog((s) => s.error);
  const loadCatalog = useCatalog((s) => s.load);
  const refused = useCatalog((s) => s.errorStatus === 401);

  useEffect(() => {
    document.documentElement.lang = lang;
  }, [lang]);
  useEffect(() => {
    if (key) void loadCatalog();
  }, [key, loadCatalog]);

  const accept = useCallback((k: string) => {
    setApiKey(k);
    setKey(k);
  }, []);

  useEffect(() => {
    // A revoked or mistyped key: forget it and ask again (with the server's message).
    if (refused && key) {
      setApiKey(null);
      setKey(null);
    }
  }, [refused, key]);

  if (!key) return <KeyPrompt onKey={(k) => { useCatalog.setState({ status: 'idle', errorStatus: null }); accept(k); }}
    refusedMessage={refused ? catalogError : null} />;
  return (
    <div className="app">
      <header className="app-header">
        <a className="brand" href="#/" data-testid="home-link">{t('app.title')}</a>
        <nav className="app-nav">
          <a href="#/" data-testid="nav-workflows"
            aria-current={!route && knowledge === undefined && !providersPage ? 'page' : undefined}>
            {t('workflows.title')}</a>
          <a href={knowledgeHref()} data-testid="nav-knowledge" aria-current={knowledge !== undefined ? 'page' : undefined}>
            {t('knowledge.title')}</a>
          <a href={PROVIDERS_HASH} data-testid="nav-providers" aria-current={providersPage ? 'page' : undefined}>
            {t('nav.providers')}</a>
        </nav>
        <span className="spacer" />
        <label className="lang">
          {t('app.language')}{' '}
          <select data-testid="language-select" value={lang} onChange={(e) => setLanguage(e.target.value as Language)}>
            {languages.map((l) => <option key={l.id} value={l.id}>{l.label}</option>)}
          </select>
        </label>
        <button type="button" className="link" data-testid="change-key" onClick={() => { setApiKey(null); setKey(null); }}>
          {t('key.change')}
        </button>
      </header>
      <main className="app-main">
        {catalogStatus === 'error' && <div className="banner error" role="alert">{t('common.error', { message: catalogError ?? '' })}</div>}
        {catalogStatus !== 'ready' ? (catalogStatus !== 'error' && <div className="center muted">{t('common.loading')}</div>)
          : route ? <Editor key={route} workflowId={route} />
            : knowledge !== undefined ? <KnowledgePage datasetId={knowledge} /> : providersPage ? <ProvidersPage /> : <WorkflowList />}
      </main>
    </div>
  );
}
