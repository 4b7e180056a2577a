/**
 * "Model providers" (`#/providers`): the tenant's own OpenAI-compatible endpoints, as on
 * Dify's page of the same name. Add one from a preset, set or replace its key (a
 * write-only field: the page only ever shows the server's masked form), list the models
 * the endpoint serves and add them, add one by hand, edit a model's limits, capabilities
 * and prices, probe what it really does, and choose the tenant's default models; below,
 * the operator's chat models with this tenant's overrides of their limits and capabilities.
 */
import { useCallback, useEffect, useState, type FormEvent } from 'react';
import { api } from '../api/client';
import { useT } from '../i18n';
import { useCatalog } from '../store/catalog';
import { ModelEditor, ModelRow } from './ModelRows';
import { OperatorModels } from './OperatorModels';
import { guessType, providersApi, type ModelDefaults, type ModelType, type Preset, type Provider,
  type UpstreamModel } from './api';
import './providers.css';

/** Reloads the model names the editor's pickers offer (without reloading the page). */
async function refreshCatalogModels(): Promise<void> {
  try {
    const kinds = await api.nodeKinds();
    useCatalog.setState({ models: kinds.models ?? [] });
  } catch { /* the pickers keep the names they had */ }
}

export function ProvidersPage() {
  const t = useT();
  const [presets, setPresets] = useState<Preset[]>([]);
  const [providers, setProviders] = useState<Provider[] | null>(null);
  const [defaults, setDefaults] = useState<ModelDefaults>({});
  const [error, setError] = useState<string | null>(null);

  const reload = useCallback(async () => {
    try {
      const found = await providersApi.list();
      setProviders(found.providers);
      setDefaults(found.defaults);
    } catch (e) {
      setError((e as Error).message);
    }
  }, []);

  useEffect(() => {
    providersApi.presets().then((p) => setPresets(p.presets), (e: Error) => setError(e.message));
    void reload();
  }, [reload]);

  /** Runs a change, shows its error, reloads the providers and the pickers' model names. */
  const change = useCallback(async (action: () => Promise<unknown>): Promise<boolean> => {
    setError(null);
    try {
      await action();
      await reload();
      await refreshCatalogModels();
      return true;
    } catch (e) {
      setError((e as Error).message);
      return false;
    }
  }, [reload]);

  return (
    <div className="providers-page" data-testid="providers-page">
      <h1>{t('providers.title')}</h1>
      <p className="muted">{t('providers.intro')}</p>
      {error && <div className="error" role="alert" data-testid="providers-error">{error}</div>}
      <Defaults providers={providers ?? []} defaults={defaults} onSave={(d) => change(() => providersApi.setDefaults(d))} />
      <AddProvider presets={presets} onAdd={(body) => change(() => providersApi.create(body))} />
      {providers === null && !error && <p className="muted">{t('common.loading')}</p>}
      {providers?.length === 0 && <p className="muted" data-testid="providers-empty">{t('providers.empty')}</p>}
      {providers?.map((p) => <ProviderCard key={p.id} provider={p} presets={presets} change={change} />)}
      {providers !== null && <OperatorModels own={providers.flatMap((p) => (p.models ?? []).map((m) => m.name))} />}
    </div>
  );
}

const TYPES: ModelType[] = ['chat', 'embedding', 'rerank'];

function Defaults({ providers, defaults, onSave }: { providers: Provider[]; defaults: ModelDefaults;
  onSave: (d: ModelDefaults) => Promise<boolean> }) {
  const t = useT();
  const operatorChat = useCatalog((s) => s.models);
  const [draft, setDraft] = useState<ModelDefaults>(defaults);
  useEffect(() => setDraft(defaults), [defaults]);
  const own = providers.flatMap((p) => p.models ?? []);
  const options = (type: ModelType) => {
    const names = own.filter((m) => m.type === type).map((m) => m.name);
    if (type === 'chat') names.push(...operatorChat.filter((n) => n !== 'default' && !names.includes(n)));
    const current = draft[type];
    if (current && !names.includes(current)) names.push(current);
    return names;
  };
  return (
    <section className="providers-defaults" data-testid="providers-defaults">
      <h2>{t('providers.defaults')}</h2>
      <p className="field-help">{t('providers.defaultsHelp')}</p>
      <div className="row">
        {TYPES.map((type) => (
          <label key={type}>
            {t(`providers.default.${type}`)}{' '}
            <select data-testid={`default-${type}`} value={draft[type] ?? ''}
              onChange={(e) => setDraft({ ...draft, [type]: e.target.value || null })}>
              <option value="">{t('providers.none')}</option>
              {options(type).map((n) => <option key={n} value={n}>{n}</option>)}
            </select>
          </label>
        ))}
        <button type="button" data-testid="save-defaults" onClick={() => void onSave(draft)}>{t('providers.saveDefaults')}</button>
      </div>
    </section>
  );
}

function AddProvider({ presets, onAdd }: { presets: Preset[];
  onAdd: (body: { preset: Preset['id']; name: string; base_url: string; api_key?: string }) => Promise<boolean> }) {
  const t = useT();
  const [preset, setPreset] = useState<Preset['id']>('openai_compatible');
  const [name, setName] = useState('');
  const [url, setUrl] = useState('');
  const [key, setKey] = useState('');
  const chosen = presets.find((p) => p.id === preset);
  const pick = (id: Preset['id']) => {
    setPreset(id);
    setUrl(presets.find((p) => p.id === id)?.base_url ?? '');
  };
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const typed = key.trim();
    setKey('');  // the key leaves the page as it is sent: on a refusal it is typed again
    if (await onAdd({ preset, name: name.trim(), base_url: url.trim(), ...(typed ? { api_key: typed } : {}) })) setName('');
  };
  return (
    <form className="providers-add" onSubmit={submit} data-testid="add-provider" autoComplete="off">
      <h2>{t('providers.add')}</h2>
      <div className="row">
        <select data-testid="provider-preset" value={preset} onChange={(e) => pick(e.target.value as Preset['id'])}
          aria-label={t('providers.preset')}>
          {presets.map((p) => <option key={p.id} value={p.id}>{p.label}</option>)}
        </select>
        <input data-testid="provider-name" value={name} placeholder={t('providers.name')} aria-label={t('providers.name')}
          onChange={(e) => setName(e.target.value)} />
        <input data-testid="provider-url" value={url} placeholder={t('providers.baseUrl')} aria-label={t('providers.baseUrl')}
          size={40} onChange={(e) => setUrl(e.target.value)} />
        {chosen?.key !== 'none' && (
          <input data-testid="provider-key" type="password" autoComplete="new-password" value={key}
            placeholder={chosen?.key === 'required' ? t('providers.keyRequired') : t('providers.keyOptional')}
            aria-label={t('providers.key')} onChange={(e) => setKey(e.target.value)} />
        )}
        <button type="submit" className="primary" data-testid="provider-add">{t('common.add')}</button>
      </div>
      {chosen?.note && <div className="field-help">{chosen.note}</div>}
    </form>
  );
}

function ProviderCard({ provider, presets, change }: { provider: Provider; presets: Preset[];
  change: (action: () => Promise<unknown>) => Promise<boolean> }) {
  const t = useT();
  const id = provider.id;
  const [editing, setEditing] = useState(false);
  const [name, setName] = useState(provider.name);
  const [url, setUrl] = useState(provider.base_url);
  const [key, setKey] = useState('');
  const [listed, setListed] = useState<UpstreamModel[] | null>(null);
  const [listError, setListError] = useState<string | null>(null);
  const [adding, setAdding] = useState(false);
  const label = presets.find((p) => p.id === provider.preset)?.label ?? provider.preset;

  const save = async (e: FormEvent) => {
    e.preventDefault();
    const body = { name: name.trim(), base_url: url.trim(), ...(key.trim() ? { api_key: key.trim() } : {}) };
    setKey('');  // as when adding: the key leaves the page as it is sent
    if (await change(() => providersApi.update(id, body))) setEditing(false);
  };
  const list = async () => {
    setListError(null);
    try {
      setListed((await providersApi.upstream(id)).models);
    } catch (e) {
      setListError((e as Error).message);
    }
  };
  const addListed = async (m: UpstreamModel) => {
    if (await change(() => providersApi.addModel(id, { name: m.id, model: m.id, type: guessType(m.id), max_context: 8192 }))) {
      setListed((items) => items?.map((x) => (x.id === m.id ? { ...x, added: true } : x)) ?? null);
    }
  };

  return (
    <section className="provider-card" data-testid={`provider-${id}`}>
      <header className="row">
        <strong>{provider.name}</strong>
        <span className="muted">{id} · {label}</span>
        <code className="muted">{provider.base_url}</code>
        <span data-testid={`provider-${id}-key`} className={provider.api_key_set ? '' : 'muted'}>
          {provider.api_key_set ? t('providers.keySet', { masked: provider.api_key_masked ?? '****' }) : t('providers.noKey')}
        </span>
        <span className="spacer" />
        <button type="button" className="small" data-testid={`provider-${id}-edit`} onClick={() => setEditing(!editing)}>
          {t('providers.edit')}</button>
        <button type="button" className="small" data-testid={`provider-${id}-delete`}
          onClick={() => { if (window.confirm(t('providers.confirmDelete', { name: provider.name }))) void change(() => providersApi.remove(id)); }}>
          {t('common.delete')}</button>
      </header>
      {editing && (
        <form className="row" onSubmit={save} autoComplete="off">
          <input value={name} aria-label={t('providers.name')} onChange={(e) => setName(e.target.value)} />
          <input value={url} size={40} aria-label={t('providers.baseUrl')} onChange={(e) => setUrl(e.target.value)} />
          <input type="password" autoComplete="new-password" data-testid={`provider-${id}-new-key`} value={key}
            placeholder={provider.api_key_set ? t('providers.replaceKey') : t('providers.key')}
            aria-label={t('providers.key')} onChange={(e) => setKey(e.target.value)} />
          <button type="submit" data-testid={`provider-${id}-save`}>{t('providers.save')}</button>
          {provider.api_key_set && (
            <button type="button" onClick={() => void change(() => providersApi.update(id, { api_key: '' }))}>
              {t('providers.removeKey')}</button>
          )}
        </form>
      )}
      <table className="provider-models" data-testid={`provider-${id}-models`}>
        <thead>
          <tr><th>{t('providers.model')}</th><th>{t('providers.upstream')}</th><th>{t('providers.type')}</th>
            <th>{t('providers.context')}</th><th>{t('providers.capabilities')}</th><th>{t('providers.pricing')}</th><th /></tr>
        </thead>
        <tbody>
          {(provider.models ?? []).map((m) => <ModelRow key={m.name} providerId={id} model={m} change={change} />)}
        </tbody>
      </table>
      {(provider.models ?? []).length === 0 && <p className="muted">{t('providers.noModels')}</p>}
      <div className="row">
        <button type="button" data-testid={`provider-${id}-list`} onClick={() => void list()}>{t('providers.listModels')}</button>
        <button type="button" data-testid={`provider-${id}-add-model`} onClick={() => setAdding(!adding)}>{t('providers.addModel')}</button>
      </div>
      {listError && <div className="error" role="alert">{listError}</div>}
      {listed && (
        <ul className="upstream-models" data-testid={`provider-${id}-upstream`}>
          {listed.length === 0 && <li className="muted">{t('providers.noneListed')}</li>}
          {listed.map((m) => (
            <li key={m.id}>
              <code>{m.id}</code> {m.owned_by && <span className="muted">{m.owned_by}</span>}{' '}
              {m.added ? <span className="muted">{t('providers.added')}</span>
                : <button type="button" className="small" data-testid={`upstream-add-${m.id}`} onClick={() => void addListed(m)}>
                  {t('common.add')}</button>}
            </li>
          ))}
        </ul>
      )}
      {adding && <ModelEditor providerId={id} change={change} onDone={() => setAdding(false)} />}
    </section>
  );
}
