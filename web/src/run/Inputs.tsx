/**
 * The run form: one field per input the workflow declares, as the validate endpoint
 * lists them (`inputs` of `POST /v1/workflows/validate`: name, type, required,
 * default, description). Values are converted to the declared type when read
 * ({@link inputValues}); objects and arrays are typed as JSON.
 */
import { useEffect, useState } from 'react';
import { api } from '../api/client';
import { useT } from '../i18n';
import type { WorkflowDoc } from '../lib/workflow';

export interface DeclaredInput {
  name: string;
  type?: string;
  required?: boolean;
  default?: unknown;
  description?: string;
}

export type InputDraft = Record<string, string | boolean>;

/** The declared inputs of the document (empty while loading or when validation fails),
 * asked again whenever `revision` changes (the saved draft). */
export function useDeclaredInputs(getDocument: () => WorkflowDoc, revision: unknown): DeclaredInput[] {
  const [inputs, setInputs] = useState<DeclaredInput[]>([]);
  useEffect(() => {
    const abort = new AbortController();
    api.validate(getDocument(), abort.signal).then((r) => setInputs((r.inputs ?? []) as DeclaredInput[]), () => undefined);
    return () => abort.abort();
  }, [getDocument, revision]);
  return inputs;
}

/** The typed values of the form; throws an Error naming the input whose text is not valid. */
export function inputValues(inputs: DeclaredInput[], draft: InputDraft): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const input of inputs) {
    const raw = draft[input.name];
    if (raw === undefined || raw === '') continue;
    const type = input.type ?? 'string';
    if (type === 'boolean') out[input.name] = Boolean(raw);
    else if (type === 'number' || type === 'integer') out[input.name] = Number(raw);
    else if (type === 'object' || type === 'array' || type.startsWith('array')) {
      try {
        out[input.name] = JSON.parse(String(raw));
      } catch {
        throw new Error(`${input.name}: not valid JSON`);
      }
    } else out[input.name] = raw;
  }
  return out;
}

function initial(input: DeclaredInput): string | boolean {
  if (input.type === 'boolean') return Boolean(input.default);
  if (input.default == null) return '';
  return typeof input.default === 'string' ? input.default : JSON.stringify(input.default);
}

export function InputsForm({ inputs, draft, onChange, skip = [] }: {
  inputs: DeclaredInput[]; draft: InputDraft; onChange: (d: InputDraft) => void; skip?: string[] }) {
  const t = useT();
  useEffect(() => {
    const missing = inputs.filter((i) => !(i.name in draft));
    if (missing.length) onChange({ ...draft, ...Object.fromEntries(missing.map((i) => [i.name, initial(i)])) });
  }, [inputs, draft, onChange]);
  const shown = inputs.filter((i) => !skip.includes(i.name));
  if (!shown.length) return <div className="muted" data-testid="run-no-inputs">{t('run.noInputs')}</div>;
  return (
    <div className="run-inputs" data-testid="run-inputs">
      {shown.map((input) => {
        const type = input.type ?? 'string';
        const value = draft[input.name] ?? '';
        const set = (v: string | boolean) => onChange({ ...draft, [input.name]: v });
        return (
          <label key={input.name} className="field" title={input.description}>
            <span>{input.name}{input.required ? ' *' : ''} <span className="muted">{type}</span></span>
            {type === 'boolean' ? (
              <input type="checkbox" data-testid={`run-input-${input.name}`} checked={Boolean(value)}
                onChange={(e) => set(e.target.checked)} />
            ) : type === 'object' || type.startsWith('array') ? (
              <textarea data-testid={`run-input-${input.name}`} rows={2} value={String(value)}
                placeholder="JSON" onChange={(e) => set(e.target.value)} />
            ) : (
              <input type={type === 'number' || type === 'integer' ? 'number' : 'text'} data-testid={`run-input-${input.name}`}
                value={String(value)} onChange={(e) => set(e.target.value)} />
            )}
          </label>
        );
      })}
    </div>
  );
}
