/**
 * A provider's models on the "Model providers" page: a row per model (its limits,
 * capabilities and prices, with Probe, Edit and Delete), the editor of a model's
 * capability overrides, limits and prices, and the form that adds a model by hand.
 */
import { useState, type FormEvent } from 'react';
import { useT } from '../i18n';
import { providersApi, type ModelType, type ProbeOutcome, type ProviderModel } from './api';

type Change = (action: () => Promise<unknown>) => Promise<boolean>;
/** The capability fields a builder may set, as the registry names them. */
const FLAGS = ['tool_choice', 'structured_output', 'json_mode', 'stream_usage', 'vision', 'reasoning'] as const;
const TOOLS = ['native', 'forced', 'none'] as const;

function capabilitySummary(caps: Record<string, unknown>): string {
  const on = FLAGS.filter((f) => caps[f] === true);
  return [`tools: ${String(caps.tools ?? '?')}`, ...on].join(', ');
}

function price(pricing: Record<string, unknown>): string {
  const num = (v: unknown) => (typeof v === 'number' ? v : 0);
  return `${num(pricing.input_per_1k)} / ${num(pricing.output_per_1k)}`;
}

export function ModelRow({ providerId, model, change }: { providerId: string; model: ProviderModel; change: Change }) {
  const t = useT();
  const [editing, setEditing] = useState(false);
  const [probing, setProbing] = useState(false);
  const [report, setReport] = useState<ProbeOutcome['report'] | null>(null);
  const [probeError, setProbeError] = useState<string | null>(null);
  const test = `model-${providerId}-${model.name}`;

  const probe = async () => {
    setProbing(true);
    setProbeError(null);
    let outcome: ProbeOutcome | null = null;
    const ok = await change(async () => { outcome = await providersApi.probe(providerId, model.name); });
    setProbing(false);
    if (ok && outcome) setReport((outcome as ProbeOutcome).report);
    else if (!ok) setProbeError(t('providers.probeFailed'));
  };

  return (
    <>
      <tr data-testid={test}>
        <td><code>{model.name}</code>{model.shadows_registry && <span className="muted" title={t('providers.shadowsHelp')}> ⚠ {t('providers.shadows')}</span>}</td>
        <td><code className="muted">{model.model}</code></td>
        <td>{t(`providers.type.${model.type}`)}</td>
        <td>{model.max_context}{model.type === 'chat' ? ` / ${model.max_output_tokens}` : ''}</td>
        <td data-testid={`${test}-caps`}>{model.type === 'chat' ? capabilitySummary(model.capabilities) : '—'}</td>
        <td data-testid={`${test}-price`}>{price(model.pricing)}</td>
        <td className="row">
          {model.type === 'chat' && (
            <button type="button" className="small" data-testid={`${test}-probe`} disabled={probing} onClick={() => void probe()}>
              {probing ? t('providers.probing') : t('providers.probe')}</button>
          )}
          <button type="button" className="small" data-testid={`${test}-edit`} onClick={() => setEditing(!editing)}>{t('providers.edit')}</button>
          <button type="button" className="small" data-testid={`${test}-delete`}
            onClick={() => void change(() => providersApi.removeModel(providerId, model.name))}>{t('common.delete')}</button>
        </td>
      </tr>
      {(report || probeError) && (
        <tr><td colSpan={7}>
          {probeError ? <span className="error">{probeError}</span> : <ProbeReport report={report ?? {}} />}
        </td></tr>
      )}
      {editing && (
        <tr><td colSpan={7}>
          <ModelEditor providerId={providerId} model={model} change={change} onDone={() => setEditing(false)} />
        </td></tr>
      )}
    </>
  );
}

function ProbeReport({ report }: { report: Record<string, unknown> }) {
  const t = useT();
  const checks = ['free_tool_call', 'forced_tool_call', 'json_mode', 'json_schema', 'stream_usage'];
  const mark = (ok: unknown) => (ok === true ? '✓' : ok === false ? '✗' : '?');
  return (
    <ul className="probe-report" data-testid="probe-report">
      {checks.map((c) => {
        const check = (report[c] ?? {}) as { ok?: boolean | null; detail?: string };
        return <li key={c}>{mark(check.ok)} {c}: <span className="muted">{check.detail}</span></li>;
      })}
      <li>{t('providers.context')}: {String(report.context_length ?? '—')} <span className="muted">{String(report.context_source ?? '')}</span></li>
    </ul>
  );
}

/** Adds a model by hand (no `model`), or edits one's limits, capabilities and prices. */
export function ModelEditor({ providerId, model, change, onDone }: { providerId: string; model?: ProviderModel;
  change: Change; onDone: () => void }) {
  const t = useT();
  const caps = (model?.capabilities ?? {}) as Record<string, unknown>;
  const [name, setName] = useState(model?.name ?? '');
  const [upstream, setUpstream] = useState(model?.model ?? '');
  const [type, setType] = useState<ModelType>(model?.type ?? 'chat');
  const [context, setContext] = useState(String(model?.max_context ?? 8192));
  const [output, setOutput] = useState(model ? String(model.max_output_tokens) : '');
  const [tools, setTools] = useState(String(caps.tools ?? 'native'));
  const [flags, setFlags] = useState<Record<string, boolean>>(
    Object.fromEntries(FLAGS.map((f) => [f, caps[f] === undefined ? f === 'tool_choice' || f === 'stream_usage' : caps[f] === true])));
  const pricing = (model?.pricing ?? {}) as Record<string, unknown>;
  const [priceIn, setPriceIn] = useState(String(pricing.input_per_1k ?? 0));
  const [priceOut, setPriceOut] = useState(String(pricing.output_per_1k ?? 0));
  const prefix = model ? `edit-${providerId}-${model.name}` : `new-model-${providerId}`;

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const capabilities = type === 'chat' ? { tools, ...flags } : {};
    const prices = { input_per_1k: Number(priceIn) || 0, output_per_1k: Number(priceOut) || 0 };
    const maxOutput = output.trim() ? Number(output) : null;
    const ok = await change(() => (model
      ? providersApi.updateModel(providerId, model.name, { model: upstream.trim() || model.name,
        max_context: Number(context), ...(maxOutput !== null ? { max_output_tokens: maxOutput } : {}), capabilities,
        pricing: prices })
      : providersApi.addModel(providerId, { name: name.trim(), model: upstream.trim() || name.trim(), type,
        max_context: Number(context), max_output_tokens: maxOutput, capabilities, pricing: prices })));
    if (ok) onDone();
  };

  return (
    <form className="model-editor" onSubmit={submit} data-testid={prefix}>
      <div className="row">
        {!model && <input data-testid={`${prefix}-name`} value={name} placeholder={t('providers.model')} required
          aria-label={t('providers.model')} onChange={(e) => setName(e.target.value)} />}
        <input data-testid={`${prefix}-upstream`} value={upstream} placeholder={t('providers.upstream')}
          aria-label={t('providers.upstream')} onChange={(e) => setUpstream(e.target.value)} />
        {!model && (
          <select value={type} data-testid={`${prefix}-type`} aria-label={t('providers.type')}
            onChange={(e) => setType(e.target.value as ModelType)}>
            {(['chat', 'embedding', 'rerank'] as const).map((k) => <option key={k} value={k}>{t(`providers.type.${k}`)}</option>)}
          </select>
        )}
        <label>{t('providers.context')} <input type="number" min={1} value={context} size={8}
          data-testid={`${prefix}-context`} onChange={(e) => setContext(e.target.value)} /></label>
        {type === 'chat' && <label>{t('providers.maxOutput')} <input type="number" min={1} value={output} size={6}
          data-testid={`${prefix}-output`} onChange={(e) => setOutput(e.target.value)} /></label>}
      </div>
      {type === 'chat' && (
        <div className="row">
          <label>{t('providers.tools')} <select value={tools} data-testid={`${prefix}-tools`} onChange={(e) => {
            setTools(e.target.value);
            // a forced call goes through tool_choice, so asking for one turns it on
            if (e.target.value === 'forced') setFlags({ ...flags, tool_choice: true });
          }}>
            {TOOLS.map((k) => <option key={k} value={k}>{t(`providers.tools.${k}`)}</option>)}
          </select></label>
          {FLAGS.map((f) => (
            <label key={f}><input type="checkbox" checked={flags[f]} data-testid={`${prefix}-${f}`}
              onChange={(e) => setFlags({ ...flags, [f]: e.target.checked })} /> {t(`providers.cap.${f}`)}</label>
          ))}
        </div>
      )}
      <div className="row">
        <label>{t('providers.priceIn')} <input type="number" min={0} step="any" value={priceIn} size={8}
          data-testid={`${prefix}-price-in`} onChange={(e) => setPriceIn(e.target.value)} /></label>
        {type === 'chat' && <label>{t('providers.priceOut')} <input type="number" min={0} step="any" value={priceOut} size={8}
          data-testid={`${prefix}-price-out`} onChange={(e) => setPriceOut(e.target.value)} /></label>}
        <button type="submit" className="primary" data-testid={`${prefix}-save`}>{model ? t('providers.save') : t('common.add')}</button>
        <button type="button" onClick={onDone}>{t('common.cancel')}</button>
      </div>
    </form>
  );
}
