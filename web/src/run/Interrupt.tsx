/**
 * A question a paused run asks, answered in place: a `user_select` (one button per
 * option), a `form_input` (a form of its fields), an agent's `ask` (its options, or a
 * free-text answer) or `confirm` (approve / reject). The answer is given to `onAnswer`
 * as the resume endpoint takes it (an option id, or the form's object), with the text a
 * person would have typed for it (the option's label, the form as `name: value` lines),
 * which the chat preview stores as the user's turn.
 */
import { useEffect, useRef, useState } from 'react';
import { useT } from '../i18n';
import type { InterruptPayload } from '../api/types';
import { questionOf } from './Chat';
import type { PendingInterrupt } from './events';

type Field = Extract<InterruptPayload, { fields: unknown }>['fields'][number];

type OnAnswer = (answer: unknown, text: string) => void;

function FormAnswer({ fields, onAnswer, disabled }: { fields: Field[]; onAnswer: OnAnswer; disabled: boolean }) {
  const t = useT();
  const [values, setValues] = useState<Record<string, string | boolean>>(() => Object.fromEntries(
    fields.map((f) => [f.name, f.type === 'boolean' ? Boolean(f.default) : f.default == null ? '' : String(f.default)])));
  const submit = () => {
    const out: Record<string, unknown> = {};
    for (const f of fields) {
      const v = values[f.name];
      if (f.type === 'number') { if (v !== '') out[f.name] = Number(v); }
      else if (f.type === 'boolean') out[f.name] = Boolean(v);
      else out[f.name] = v;
    }
    onAnswer(out, Object.entries(out).map(([k, v]) => `${k}: ${String(v)}`).join('\n'));
  };
  return (
    <form className="interrupt-form" onSubmit={(e) => { e.preventDefault(); submit(); }}>
      {fields.map((f) => (
        <label key={f.name} className="field">
          <span>{f.label || f.name}{f.required !== false && f.type !== 'boolean' ? ' *' : ''}</span>
          {f.enum && f.enum.length ? (
            <select data-testid={`interrupt-field-${f.name}`} value={String(values[f.name] ?? '')}
              onChange={(e) => setValues({ ...values, [f.name]: e.target.value })}>
              <option value="" />
              {f.enum.map((o) => <option key={String(o)} value={String(o)}>{String(o)}</option>)}
            </select>
          ) : f.type === 'boolean' ? (
            <input type="checkbox" data-testid={`interrupt-field-${f.name}`} checked={Boolean(values[f.name])}
              onChange={(e) => setValues({ ...values, [f.name]: e.target.checked })} />
          ) : (
            <input type={f.type === 'number' ? 'number' : 'text'} data-testid={`interrupt-field-${f.name}`}
              value={String(values[f.name] ?? '')} onChange={(e) => setValues({ ...values, [f.name]: e.target.value })} />
          )}
        </label>
      ))}
      <button type="submit" className="primary" data-testid="interrupt-submit" disabled={disabled}>{t('run.interrupt.submit')}</button>
    </form>
  );
}

export function InterruptCard({ interrupt, onAnswer, disabled = false }: {
  interrupt: PendingInterrupt; onAnswer: OnAnswer; disabled?: boolean }) {
  const t = useT();
  const [text, setText] = useState('');
  const p = interrupt.payload;
  const question = questionOf(p);
  const options = 'options' in p ? p.options ?? [] : [];
  const fields = 'fields' in p ? p.fields : [];
  const errors = [('error' in p ? p.error : null), ...('errors' in p ? p.errors ?? [] : [])]
    .filter((e): e is string => Boolean(e));
  // a question that appears below the fold of the run panel is brought into view
  const card = useRef<HTMLDivElement>(null);
  useEffect(() => { card.current?.scrollIntoView?.({ block: 'nearest' }); }, [interrupt.id]);
  return (
    <div ref={card} className="interrupt" data-testid={`interrupt-${interrupt.nodeId}`} data-kind={interrupt.kind}>
      <div className="interrupt-head">
        <span className="badge run-waiting">{t('run.node.waiting')}</span> <strong>{interrupt.nodeId}</strong>
      </div>
      {question && <p className="interrupt-question" data-testid="interrupt-question">{question}</p>}
      {'arguments' in p && p.arguments && <pre className="json">{p.arguments}</pre>}
      {errors.map((e) => <div key={e} className="banner error">{e}</div>)}
      {fields.length > 0 ? <FormAnswer fields={fields} onAnswer={onAnswer} disabled={disabled} /> : (
        <div className="interrupt-options">
          {options.map((o) => (
            <button key={o.id} type="button" data-testid={`interrupt-option-${o.id}`} disabled={disabled}
              onClick={() => onAnswer(o.id, o.label || o.id)}>{o.label || o.id}</button>
          ))}
        </div>
      )}
      {interrupt.kind === 'ask' && (
        <form className="interrupt-free" onSubmit={(e) => { e.preventDefault(); if (text.trim()) onAnswer(text.trim(), text.trim()); }}>
          <input data-testid="interrupt-text" value={text} placeholder={t('run.interrupt.freeText')}
            onChange={(e) => setText(e.target.value)} />
          <button type="submit" disabled={disabled || !text.trim()}>{t('run.interrupt.submit')}</button>
        </form>
      )}
    </div>
  );
}
