/**
 * The workflow's environment variables (`env.NAME`): strings and numbers kept in the
 * document, and secrets whose values are write-only. A secret's value is typed into a
 * password field and sent straight to PUT /v1/workflows/{id}/secrets (after the draft
 * that declares it is saved); it never enters the editor's state, its undo history or
 * the browser's storage, and the server never sends it back: the section shows only
 * "set" or "not set" (GET .../secrets).
 */
import { useCallback, useEffect, useState } from 'react';
import { api } from '../api/client';
import type { SecretsOut } from '../api/types';
import { useT } from '../i18n';
import type { EnvDecl } from '../lib/workflow';
import { useEditor } from '../store/editor';
import { saveNow } from '../store/persistence';

const TYPES: NonNullable<EnvDecl['type']>[] = ['string', 'number', 'secret'];

function SecretValue({ name, isSet, onSaved }: { name: string; isSet: boolean; onSaved: () => void }) {
  const t = useT();
  const workflowId = useEditor((s) => s.workflowId);
  const [value, setValue] = useState('');
  const [error, setError] = useState<string | null>(null);
  const store = async (next: string | null) => {
    if (!workflowId) return;
    setError(null);
    try {
      await saveNow(); // the draft must declare the secret before a value can be set
      await api.setSecrets(workflowId, { [name]: next });
      setValue('');
      onSaved();
    } catch (e) {
      setError((e as Error).message);
    }
  };
  return (
    <div className="row env-secret" data-testid={`env-secret-${name}`}>
      <span className={`badge ${isSet ? 'ok' : 'warn'}`} data-testid={`env-secret-status-${name}`} data-set={isSet}>
        {isSet ? t('env.set') : t('env.notSet')}</span>
      <input type="password" autoComplete="new-password" aria-label={t('env.secretValue')} value={value}
        data-testid={`env-secret-input-${name}`} placeholder={isSet ? '••••••' : t('env.secretPlaceholder')}
        onChange={(e) => setValue(e.target.value)}
        onKeyDown={(e) => { if (e.key === 'Enter' && value) void store(value); }} />
      <button type="button" className="small" disabled={!value} data-testid={`env-secret-save-${name}`}
        onClick={() => void store(value)}>{t('env.saveSecret')}</button>
      {isSet && <button type="button" className="small" data-testid={`env-secret-clear-${name}`}
        onClick={() => void store(null)}>{t('env.clearSecret')}</button>}
      {error && <div className="error" role="alert">{error}</div>}
    </div>
  );
}

export function EnvironmentSection() {
  const t = useT();
  const list = useEditor((s) => s.meta.environment) ?? [];
  const workflowId = useEditor((s) => s.workflowId);
  const setMeta = useEditor((s) => s.setMeta);
  const [status, setStatus] = useState<SecretsOut | null>(null);
  const hasSecret = list.some((v) => v.type === 'secret');
  const refresh = useCallback(() => {
    // asked only when a secret is declared: most workflows have none (and a new one is not saved yet)
    if (!workflowId || !hasSecret) return;
    api.secrets(workflowId).then(setStatus, () => setStatus(null));
  }, [workflowId, hasSecret]);
  useEffect(refresh, [refresh]);
  const set = (next: EnvDecl[]) => setMeta({ environment: next });
  const update = (i: number, patch: Partial<EnvDecl>) => set(list.map((v, j) => (j === i ? { ...v, ...patch } : v)));
  const isSet = (name: string) => !!status?.secrets.find((s) => s.name === name)?.set;
  return (
    <div className="var-list env-list" data-testid="workflow-environment">
      {list.map((v, i) => (
        <div key={i} className="env-var">
          <div className="row var-row">
            <input aria-label={t('workflow.varName')} data-testid={`env-name-${i}`} value={v.name}
              onChange={(e) => update(i, { name: e.target.value })} />
            <select aria-label={t('workflow.varType')} data-testid={`env-type-${i}`} value={v.type ?? 'string'}
              onChange={(e) => update(i, { type: e.target.value as EnvDecl['type'], value: null })}>
              {TYPES.map((ty) => <option key={ty} value={ty}>{t(`env.type.${ty}`)}</option>)}
            </select>
            <button type="button" className="icon small" title={t('common.remove')} data-testid={`env-remove-${i}`}
              onClick={() => set(list.filter((_, j) => j !== i))}>×</button>
          </div>
          {v.type === 'secret'
            ? <SecretValue name={v.name} isSet={isSet(v.name)} onSaved={refresh} />
            : (
              <input aria-label={t('env.value')} data-testid={`env-value-${i}`} inputMode={v.type === 'number' ? 'decimal' : undefined}
                value={v.value === null || v.value === undefined ? '' : String(v.value)}
                onChange={(e) => {
                  const text = e.target.value;
                  const num = Number(text);
                  update(i, { value: v.type === 'number' && text.trim() !== '' && !Number.isNaN(num) ? num : text });
                }} />
            )}
        </div>
      ))}
      <button type="button" className="small" data-testid="env-add" onClick={() => {
        let n = list.length + 1;
        while (list.some((v) => v.name === `ENV_${n}`)) n += 1;
        set([...list, { name: `ENV_${n}`, type: 'string', value: '' }]);
      }}>+ {t('common.add')}</button>
      <p className="muted small">{t('env.help')}</p>
    </div>
  );
}

/** The import dialog's question for the secrets a file declares without values
 * (`secrets_needed` of POST /v1/workflows/import): one password field each. */
export function ImportSecrets({ names, values, onChange }: { names: readonly string[];
  values: Record<string, string>; onChange: (values: Record<string, string>) => void }) {
  const t = useT();
  if (!names.length) return null;
  return (
    <div className="import-secrets" data-testid="import-secrets">
      <p>{t('env.importSecrets')}</p>
      {names.map((name) => (
        <div key={name} className="row">
          <code>{name}</code>
          <input type="password" autoComplete="new-password" aria-label={`${t('env.secretValue')} ${name}`}
            data-testid={`import-secret-${name}`} value={values[name] ?? ''}
            onChange={(e) => onChange({ ...values, [name]: e.target.value })} />
        </div>
      ))}
    </div>
  );
}
