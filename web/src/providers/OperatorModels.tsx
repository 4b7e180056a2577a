/**
 * The operator's chat models on the "Model providers" page, with this tenant's overrides
 * of their limits and capabilities (`/v1/model-capabilities/{name}`): what the tenant's
 * runs see, an editor whose values are stored as the tenant's override, and a reset. A
 * local server behind `default` that ignores tool_choice, or has a 4096-token window,
 * is described here without copying the operator's registry.
 */
import { useEffect, useState, type FormEvent } from 'react';
import { useT } from '../i18n';
import { useCatalog } from '../store/catalog';
import { providersApi, type ModelCapabilities } from './api';

const FLAGS = ['tool_choice', 'structured_output', 'json_mode', 'stream_usage', 'vision', 'reasoning'] as const;
const TOOLS = ['native', 'forced', 'none'] as const;

/** The operator's chat models: the names the pickers offer that are not the tenant's own. */
export function OperatorModels({ own }: { own: string[] }) {
  const t = useT();
  const names = useCatalog((s) => s.models).filter((n) => !own.includes(n));
  return (
    <section className="operator-models" data-testid="operator-models">
      <h2>{t('providers.operatorModels')}</h2>
      <p className="field-help">{t('providers.operatorModelsHelp')}</p>
      <table className="provider-models">
        <thead>
          <tr><th>{t('providers.model')}</th><th>{t('providers.context')}</th><th>{t('providers.capabilities')}</th><th /></tr>
        </thead>
        <tbody>{names.map((n) => <OperatorModel key={n} name={n} />)}</tbody>
      </table>
    </section>
  );
}

function summary(caps: Record<string, unknown>): string {
  return [`tools: ${String(caps.tools ?? '?')}`, ...FLAGS.filter((f) => caps[f] === true)].join(', ');
}

function OperatorModel({ name }: { name: string }) {
  const t = useT();
  const [found, setFound] = useState<ModelCapabilities | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [editing, setEditing] = useState(false);
  const test = `operator-${name}`;

  useEffect(() => {
    providersApi.capabilities(name).then(setFound, (e: Error) => setError(e.message));
  }, [name]);

  const act = async (action: () => Promise<ModelCapabilities | void>) => {
    setError(null);
    try {
      const answer = await action();
      setFound(answer ?? await providersApi.capabilities(name));
      setEditing(false);
    } catch (e) {
      setError((e as Error).message);
    }
  };

  if (!found) return <tr><td><code>{name}</code></td><td colSpan={3} className={error ? 'error' : 'muted'}>{error ?? t('common.loading')}</td></tr>;
  const overridden = Object.keys(found.override ?? {}).length > 0;
  return (
    <>
      <tr data-testid={test}>
        <td><code>{name}</code>{overridden && <span className="muted" data-testid={`${test}-overridden`}> · {t('providers.overridden')}</span>}</td>
        <td>{found.max_context} / {found.max_output_tokens}</td>
        <td data-testid={`${test}-caps`}>{summary(found.capabilities as Record<string, unknown>)}</td>
        <td className="row">
          <button type="button" className="small" data-testid={`${test}-edit`} onClick={() => setEditing(!editing)}>{t('providers.edit')}</button>
          {overridden && <button type="button" className="small" data-testid={`${test}-reset`}
            onClick={() => void act(() => providersApi.dropOverride(name))}>{t('providers.reset')}</button>}
        </td>
      </tr>
      {error && <tr><td colSpan={4} className="error" role="alert">{error}</td></tr>}
      {editing && <tr><td colSpan={4}><OverrideEditor found={found} test={test}
        onSave={(body) => act(() => providersApi.setOverride(name, body))} onCancel={() => setEditing(false)} /></td></tr>}
    </>
  );
}

function OverrideEditor({ found, test, onSave, onCancel }: { found: ModelCapabilities; test: string;
  onSave: (body: Record<string, unknown>) => Promise<void>; onCancel: () => void }) {
  const t = useT();
  const caps = found.capabilities as Record<string, unknown>;
  const [context, setContext] = useState(String(found.max_context));
  const [output, setOutput] = useState(String(found.max_output_tokens));
  const [tools, setTools] = useState(String(caps.tools ?? 'native'));
  const [flags, setFlags] = useState<Record<string, boolean>>(Object.fromEntries(FLAGS.map((f) => [f, caps[f] === true])));
  const submit = (e: FormEvent) => {
    e.preventDefault();
    void onSave({ max_context: Number(context), max_output_tokens: Number(output), capabilities: { tools, ...flags } });
  };
  return (
    <form className="model-editor" onSubmit={submit} data-testid={`${test}-editor`}>
      <div className="row">
        <label>{t('providers.context')} <input type="number" min={1} value={context} data-testid={`${test}-context`}
          onChange={(e) => setContext(e.target.value)} /></label>
        <label>{t('providers.maxOutput')} <input type="number" min={1} value={output} data-testid={`${test}-output`}
          onChange={(e) => setOutput(e.target.value)} /></label>
        <label>{t('providers.tools')} <select value={tools} data-testid={`${test}-tools`} onChange={(e) => {
          setTools(e.target.value);
          if (e.target.value === 'forced') setFlags({ ...flags, tool_choice: true });
        }}>
          {TOOLS.map((k) => <option key={k} value={k}>{t(`providers.tools.${k}`)}</option>)}
        </select></label>
      </div>
      <div className="row">
        {FLAGS.map((f) => (
          <label key={f}><input type="checkbox" checked={flags[f]} data-testid={`${test}-${f}`}
            onChange={(e) => setFlags({ ...flags, [f]: e.target.checked })} /> {t(`providers.cap.${f}`)}</label>
        ))}
        <button type="submit" className="primary" data-testid={`${test}-save`}>{t('providers.save')}</button>
        <button type="button" onClick={onCancel}>{t('common.cancel')}</button>
      </div>
    </form>
  );
}
