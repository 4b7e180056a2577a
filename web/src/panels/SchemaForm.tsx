/**
 * A config form generated from a kind's config JSON Schema (from the catalog). Widgets
 * follow the schema: enums are selects, numbers and booleans inputs, objects fieldsets,
 * string maps key/value rows, arrays of objects editable item lists (an if/else's cases
 * and their conditions, a classifier's categories, extracted fields, options), `{"ref"}`
 * values the variable picker, literal-or-reference values a switch between the two,
 * template text an editor with "insert variable", `code` a code editor, `model` a text
 * field with suggestions. Anything else is edited as JSON. Unset fields show the
 * schema's default and stay out of the document until changed. Field labels are the
 * `titles` the caller gives (the catalog's titles in the UI language), else English.
 */
import { createContext, lazy, memo, Suspense, useContext, useRef, useState, type ReactNode } from 'react';
import { useT } from '../i18n';
import { localFieldLabel, localHelp, localValueLabel, type FieldTitles } from '../lib/fieldLabel';
import { compilerPath } from '../lib/scope';
import {
  alternatives, initialObject, initialValue, isRefSchema, nullable, resolve, singular, type JSONSchema,
} from '../lib/schema';
import { isRef, type Json, type JsonObject } from '../lib/workflow';
import { VariablePicker } from './VariablePicker';
import { DatasetPicker } from '../knowledge/DatasetPicker';

const CodeField = lazy(() => import('./CodeField'));

interface FormContext {
  root: JSONSchema;
  nodeId: string;
  config: JsonObject;
  models: string[];
  /** Config paths (`config.cases[0].left`) whose reference the compiler refuses here. */
  refused: ReadonlySet<string> | null;
  /** Field titles in the UI language (property name -> title); English when missing. */
  titles: FieldTitles;
  /** Enum value labels in the UI language (value -> label); the value itself when missing. */
  values: FieldTitles;
  /** Field help in the UI language (English help -> help); English when missing. */
  help: FieldTitles;
}

const NO_TITLES: FieldTitles = Object.freeze({});
const Ctx = createContext<FormContext>({ root: {}, nodeId: '', config: {}, models: [], refused: null, titles: {},
  values: {}, help: {} });

type Change = (value: Json | undefined) => void;

interface FieldProps {
  name: string;
  path: string;
  schema: JSONSchema;
  value: Json | undefined;
  onChange: Change;
  required?: boolean;
  compact?: boolean;
}

function firstParagraph(text?: string): string {
  return (text ?? '').split(/\n\s*\n/)[0].replace(/\s+/g, ' ').replace(/``/g, '');
}

function isTemplateText(name: string, s: JSONSchema): boolean {
  return /template|jinja/i.test(s.description ?? '') || name === 'url';
}

function isLongText(name: string, s: JSONSchema): boolean {
  return isTemplateText(name, s) && name !== 'url'
    || /prompt|template|instructions|text|description|raw/i.test(name);
}

function Row({ label, path, description, required, children, compact }: { label: string; path: string;
  description?: string; required?: boolean; children: ReactNode; compact?: boolean }) {
  return (
    <div className={`field${compact ? ' compact' : ''}`} data-testid={`config-field-${path}`}>
      {label && <label className="field-label">{label}{required && <span className="error"> *</span>}</label>}
      {children}
      {!compact && description && <div className="field-help">{firstParagraph(description)}</div>}
    </div>
  );
}

/** Inserts `{{ path }}` into template text at the cursor. */
function TemplateText({ value, onChange, long, testId, plain }: { value: string; onChange: (v: string) => void; long: boolean;
  testId: string; plain?: boolean }) {
  const t = useT();
  const { nodeId } = useContext(Ctx);
  const ref = useRef<HTMLTextAreaElement & HTMLInputElement>(null);
  const [picking, setPicking] = useState(false);
  // The caret (selection) as last seen in the field: the picker takes the focus, and a
  // field re-rendered meanwhile may have lost it; no caret seen yet: the end of the text.
  const caret = useRef<[number, number] | null>(null);
  const remember = () => {
    const el = ref.current;
    if (el && el.selectionStart !== null) caret.current = [el.selectionStart, el.selectionEnd ?? el.selectionStart];
  };
  const insert = (path: string) => {
    const [at, end] = caret.current && caret.current[1] <= value.length ? caret.current : [value.length, value.length];
    const piece = `{{ ${path} }}`;
    onChange(`${value.slice(0, at)}${piece}${value.slice(end)}`);
    caret.current = [at + piece.length, at + piece.length];
    // back in the field with the caret after the variable, to go on typing
    requestAnimationFrame(() => {
      const el = ref.current;
      if (!el) return;
      el.focus();
      el.setSelectionRange(at + piece.length, at + piece.length);
    });
  };
  const track = { onSelect: remember, onKeyUp: remember, onMouseUp: remember, onBlur: remember };
  return (
    <div className="template-field">
      {long ? <textarea ref={ref} data-testid={testId} value={value} rows={3} onChange={(e) => onChange(e.target.value)} {...track} />
        : <input ref={ref} data-testid={testId} value={value} onChange={(e) => onChange(e.target.value)} {...track} />}
      {!plain && <button type="button" className="link small" data-testid={`${testId}-insert`} onClick={() => setPicking(!picking)}>
        {`{x} ${t('config.insertVariable')}`}</button>}
      {picking && <VariablePicker nodeId={nodeId} fieldPath={testId} onPick={insert} onClose={() => setPicking(false)} />}
    </div>
  );
}

/** A structured reference: the path as text, the picker, and a flag when the node read
 * is not upstream of this one. */
function RefInput({ value, onChange, testId }: { value: string; onChange: (path: string) => void; testId: string }) {
  const t = useT();
  const { nodeId, refused } = useContext(Ctx);
  const [picking, setPicking] = useState(false);
  const dangling = !!value && !!refused?.has(compilerPath(testId));
  return (
    <div className="ref-field">
      <div className="row">
        <span className="ref-prefix">{t('config.modeRef')}</span>
        <input data-testid={testId} value={value} placeholder={t('config.refPlaceholder')} onChange={(e) => onChange(e.target.value)} />
        <button type="button" data-testid={`${testId}-pick`} title={t('config.pickVariable')} onClick={() => setPicking(!picking)}>{'{x}'}</button>
      </div>
      {dangling && <div className="error small">{t('config.danglingRef', { ref: value })}</div>}
      {picking && <VariablePicker nodeId={nodeId} fieldPath={testId} onPick={onChange} onClose={() => setPicking(false)} />}
    </div>
  );
}

function JsonInput({ value, onChange, testId }: { value: Json | undefined; onChange: Change; testId: string }) {
  const t = useT();
  const shown = value === undefined ? '' : JSON.stringify(value, null, 2);
  const [text, setText] = useState(shown);
  const [error, setError] = useState<string | null>(null);
  const [last, setLast] = useState(shown);
  if (shown !== last) {
    setLast(shown);
    setText(shown);
    setError(null);
  }
  return (
    <>
      <textarea className="json" data-testid={testId} value={text} rows={Math.min(8, Math.max(2, text.split('\n').length))}
        onChange={(e) => {
          setText(e.target.value);
          if (!e.target.value.trim()) { setError(null); onChange(undefined); return; }
          try {
            const parsed = JSON.parse(e.target.value) as Json;
            setError(null);
            setLast(JSON.stringify(parsed, null, 2));
            onChange(parsed);
          } catch (err) {
            setError(t('config.invalidJson', { message: (err as Error).message }));
          }
        }} />
      {error && <div className="error small">{error}</div>}
    </>
  );
}

/** A value that is a literal (text or JSON) or a reference. */
function ValueInput({ value, onChange, testId }: { value: Json | undefined; onChange: Change; testId: string }) {
  const t = useT();
  const mode = isRef(value) ? 'ref' : typeof value === 'string' || value === undefined ? 'text' : 'json';
  return (
    <div className="value-field">
      <div className="mode-switch" role="group">
        <button type="button" aria-pressed={mode === 'ref'} data-testid={`${testId}-mode-ref`} title={t('config.useReference')}
          onClick={() => mode !== 'ref' && onChange({ ref: '' })}>{t('config.modeRef')}</button>
        <button type="button" aria-pressed={mode === 'text'} data-testid={`${testId}-mode-text`} title={t('config.useLiteral')}
          onClick={() => mode !== 'text' && onChange('')}>{t('config.modeText')}</button>
        <button type="button" aria-pressed={mode === 'json'} data-testid={`${testId}-mode-json`} title={t('config.json')}
          onClick={() => mode !== 'json' && onChange(null)}>{t('config.modeJson')}</button>
      </div>
      {mode === 'ref' && <RefInput value={isRef(value) ? value.ref : ''} onChange={(p) => onChange({ ref: p })} testId={testId} />}
      {mode === 'text' && <input data-testid={testId} value={typeof value === 'string' ? value : ''}
        onChange={(e) => onChange(e.target.value)} />}
      {mode === 'json' && <JsonInput value={value === null ? undefined : value} onChange={onChange} testId={testId} />}
    </div>
  );
}

function Select({ options, value, onChange, testId, allowUnset }: { options: Json[]; value: Json | undefined;
  onChange: Change; testId: string; allowUnset?: boolean }) {
  const t = useT();
  const { values } = useContext(Ctx);
  const index = options.findIndex((o) => JSON.stringify(o) === JSON.stringify(value));
  return (
    <select data-testid={testId} value={index < 0 ? '' : String(index)}
      onChange={(e) => onChange(e.target.value === '' ? undefined : options[Number(e.target.value)])}>
      {(allowUnset || index < 0) && <option value="">{t('config.unset')}</option>}
      {options.map((o, i) => <option key={i} value={String(i)}>{localValueLabel(o, values)}</option>)}
    </select>
  );
}

function ObjectFields({ schema, value, onChange, path, compact }: { schema: JSONSchema; value: JsonObject;
  onChange: (v: JsonObject) => void; path: string; compact?: boolean }) {
  const { root } = useContext(Ctx);
  const s = resolve(schema, root);
  const required = new Set(s.required ?? []);
  return (
    <div className={compact ? 'object-fields compact' : 'object-fields'}>
      {Object.entries(s.properties ?? {}).map(([key, prop]) => (
        <Field key={key} name={key} path={path ? `${path}.${key}` : key} schema={prop} value={value[key]}
          required={required.has(key)} compact={compact}
          onChange={(v) => {
            const next = { ...value };
            if (v === undefined) delete next[key];
            else next[key] = v;
            onChange(next);
          }} />
      ))}
    </div>
  );
}

function ItemList({ schema, value, onChange, path }: { schema: JSONSchema; value: Json[]; onChange: (v: Json[]) => void;
  path: string }) {
  const t = useT();
  const { root } = useContext(Ctx);
  const item = resolve(schema.items, root);
  const isObject = !!item.properties;
  const compact = !!item.properties?.operator;
  const add = () => {
    const owner = singular(path.split('.').pop() ?? '');
    let fresh = isObject ? initialObject(item, root, value.length, owner) : initialValue(item, root, owner, value.length);
    if (isObject && item.properties?.id && fresh && typeof fresh === 'object' && !Array.isArray(fresh)) {
      const ids = new Set(value.map((v) => (v && typeof v === 'object' && !Array.isArray(v) ? v.id : null)));
      let n = value.length + 1;
      while (ids.has(`${owner}_${n}`)) n += 1;
      fresh = { ...fresh, id: `${owner}_${n}` };
    }
    if (compact && fresh && typeof fresh === 'object' && !Array.isArray(fresh) && !('right' in fresh)) {
      fresh = { ...fresh, right: '' };
    }
    onChange([...value, fresh]);
  };
  const move = (i: number, d: number) => {
    const next = [...value];
    const [x] = next.splice(i, 1);
    next.splice(i + d, 0, x);
    onChange(next);
  };
  return (
    <div className="item-list">
      {value.map((v, i) => (
        <div key={i} className={`item-card${compact ? ' condition' : ''}`} data-testid={`config-item-${path}.${i}`}>
          <div className="item-tools">
            <span className="muted">#{i + 1}</span>
            <span className="spacer" />
            <button type="button" className="icon small" disabled={i === 0} onClick={() => move(i, -1)}>↑</button>
            <button type="button" className="icon small" disabled={i === value.length - 1} onClick={() => move(i, 1)}>↓</button>
            <button type="button" className="icon small" title={t('config.removeItem')} data-testid={`config-remove-${path}.${i}`}
              onClick={() => onChange(value.filter((_, j) => j !== i))}>×</button>
          </div>
          {isObject ? (
            <ObjectFields schema={item} path={`${path}.${i}`} compact={compact}
              value={v && typeof v === 'object' && !Array.isArray(v) ? v : {}} onChange={(nv) => onChange(value.map((x, j) => (j === i ? nv : x)))} />
          ) : (
            <Field name="" path={`${path}.${i}`} schema={item} value={v} compact
              onChange={(nv) => onChange(value.map((x, j) => (j === i ? nv ?? null : x)))} />
          )}
        </div>
      ))}
      <button type="button" className="small" data-testid={`config-add-${path}`} onClick={add}>+ {t('config.addItem')}</button>
    </div>
  );
}

function KeyValue({ schema, value, onChange, path }: { schema: JSONSchema; value: JsonObject; onChange: (v: JsonObject) => void;
  path: string }) {
  const t = useT();
  const { root } = useContext(Ctx);
  const valueSchema = typeof schema.additionalProperties === 'object' ? resolve(schema.additionalProperties, root) : {};
  const entries = Object.entries(value);
  const rebuild = (list: [string, Json][]) => onChange(Object.fromEntries(list));
  return (
    <div className="kv-list">
      {entries.map(([k, v], i) => (
        <div key={i} className="kv-row row" data-testid={`config-kv-${path}.${i}`}>
          <input className="kv-key" aria-label={t('config.key')} value={k} data-testid={`config-kv-key-${path}.${i}`}
            onChange={(e) => rebuild(entries.map((x, j) => (j === i ? [e.target.value, x[1]] : x)))} />
          <div className="kv-value">
            {valueSchema.type === 'string' && !valueSchema.enum ? (
              // Map values of text are templates (headers, query, form) or paths: text with insert-variable.
              <TemplateText value={typeof v === 'string' ? v : ''} long={false} testId={`config-${path}.${i}`}
                onChange={(nv) => rebuild(entries.map((x, j) => (j === i ? [x[0], nv] : x)))} />
            ) : (
              <Field name="" path={`${path}.${k}`} schema={valueSchema} value={v} compact
                onChange={(nv) => rebuild(entries.map((x, j) => (j === i ? [x[0], nv ?? ''] : x)))} />
            )}
          </div>
          <button type="button" className="icon small" onClick={() => rebuild(entries.filter((_, j) => j !== i))}>×</button>
        </div>
      ))}
      <button type="button" className="small" data-testid={`config-add-${path}`} onClick={() => {
        let n = entries.length + 1;
        while (`key_${n}` in value) n += 1;
        rebuild([...entries, [`key_${n}`, initialValue(valueSchema, root)]]);
      }}>+ {t('config.addEntry')}</button>
    </div>
  );
}

function Field({ name, path, schema, value, onChange, required, compact }: FieldProps) {
  const t = useT();
  const { root, config, models, titles, help } = useContext(Ctx);
  const s = resolve(schema, root);
  const label = name ? localFieldLabel(name, schema.$ref ? { title: schema.title } : s, titles) : '';
  const description = s.description ? localHelp(firstParagraph(s.description), help) : undefined;
  const alts = alternatives(s, root);
  const testId = `config-${path}`;
  const shown = value === undefined ? s.default : value;
  const row = (widget: ReactNode) => (
    <Row label={label} path={path} description={description} required={required} compact={compact}>{widget}</Row>
  );

  if (alts.length > 1) {
    const refAlt = alts.some((a) => isRefSchema(a, root));
    const textAlt = alts.some((a) => a.type === 'string');
    if (refAlt && textAlt) {
      if (isRef(shown)) return row(<ValueInput value={shown} onChange={onChange} testId={testId} />);
      return row(
        <div>
          <TemplateText value={typeof shown === 'string' ? shown : ''} onChange={onChange} long={isLongText(name, s)} testId={testId} />
          <button type="button" className="link small" data-testid={`${testId}-mode-ref`} onClick={() => onChange({ ref: '' })}>
            {t('config.useReference')}</button>
        </div>,
      );
    }
    return row(<JsonInput value={value} onChange={onChange} testId={testId} />);
  }
  const a = alts[0] ?? {};
  const canNull = nullable(s, root);
  if (isRefSchema(a, root)) {
    return row(<RefInput value={isRef(shown) ? shown.ref : ''} onChange={(p) => onChange({ ref: p })} testId={testId} />);
  }
  if (a.enum) {
    return row(<Select options={a.enum} value={value ?? s.default ?? undefined} onChange={onChange} testId={testId}
      allowUnset={canNull || !required} />);
  }
  const type = Array.isArray(a.type) ? a.type[0] : a.type;
  if (!type && !a.properties && !a.items) return row(<ValueInput value={value} onChange={onChange} testId={testId} />);
  switch (type) {
    case 'string': {
      const text = typeof shown === 'string' ? shown : '';
      if (name === 'code') {
        const language = typeof config.language === 'string' ? config.language : 'python';
        return row(
          <Suspense fallback={<textarea data-testid={testId} value={text} onChange={(e) => onChange(e.target.value)} />}>
            <CodeField value={text} language={language} onChange={onChange} testId={testId} />
          </Suspense>,
        );
      }
      if (name === 'model' || /model registry/i.test(s.description ?? '')) {
        const listId = `models-${path}`;
        return row(
          <>
            <input data-testid={testId} list={listId} value={text} placeholder={t('config.modelHint')}
              onChange={(e) => onChange(e.target.value || (canNull ? undefined : ''))} />
            <datalist id={listId}>{models.map((m) => <option key={m} value={m} />)}</datalist>
          </>,
        );
      }
      if (isTemplateText(name, s) || isLongText(name, s)) {
        return row(<TemplateText value={text} onChange={onChange} long={isLongText(name, s)} testId={testId}
          plain={!isTemplateText(name, s) && !/prompt|template/i.test(name)} />);
      }
      return row(<input data-testid={testId} value={text} pattern={a.pattern}
        onChange={(e) => onChange(e.target.value === '' && canNull ? undefined : e.target.value)} />);
    }
    case 'number':
    case 'integer':
      return row(<input data-testid={testId} type="number" step={type === 'integer' ? 1 : 'any'}
        value={typeof shown === 'number' ? shown : ''} min={a.minimum} max={a.maximum}
        onChange={(e) => onChange(e.target.value === '' ? undefined : Number(e.target.value))} />);
    case 'boolean':
      return row(<input data-testid={testId} type="checkbox" checked={shown === true} onChange={(e) => onChange(e.target.checked)} />);
    case 'array': {
      const list = Array.isArray(shown) ? shown : [];
      const item = resolve(a.items, root);
      if (name === 'datasets' && item.type === 'string') {  // ids of the tenant's datasets: picked by name
        return row(<DatasetPicker value={list.filter((v): v is string => typeof v === 'string')} testId={testId}
          onChange={(ids) => onChange(ids.length ? ids : undefined)} />);
      }
      if (item.properties || isRefSchema(item, root)) {
        return row(<ItemList schema={a} value={list} onChange={onChange} path={path} />);
      }
      return row(<JsonInput value={value} onChange={onChange} testId={testId} />);
    }
    case 'object': {
      const obj = shown && typeof shown === 'object' && !Array.isArray(shown) ? shown : {};
      if (a.properties && Object.keys(a.properties).length) {
        return (
          <fieldset className="object" data-testid={`config-field-${path}`}>
            <legend>{label}</legend>
            <ObjectFields schema={a} value={obj} path={path} onChange={onChange} />
          </fieldset>
        );
      }
      if (typeof a.additionalProperties === 'object') {
        const vs = resolve(a.additionalProperties, root);
        if (vs.type === 'string' || vs.enum) return row(<KeyValue schema={a} value={obj} onChange={onChange} path={path} />);
      }
      return row(<JsonInput value={value} onChange={onChange} testId={testId} />);
    }
    default:
      return row(<JsonInput value={value} onChange={onChange} testId={testId} />);
  }
}

function advanced(key: string, prop: JSONSchema, root: JSONSchema, required: Set<string>): boolean {
  if (required.has(key)) return false;
  const s = resolve(prop, root);
  if (isRefSchema(s, root)) return true;
  if (s.default === undefined) return false;
  const [a] = alternatives(s, root);
  const type = Array.isArray(a?.type) ? a.type[0] : a?.type;
  return !!a && !a.enum && (type === 'number' || type === 'integer' || type === 'boolean' || isRefSchema(a, root));
}

/** The form of one node's config. `onChange` gets the whole new config. */
export const SchemaForm = memo(function SchemaForm({ schema, value, onChange, nodeId, models, refused, flat, testId,
  titles = NO_TITLES, values = NO_TITLES, help = NO_TITLES }: {
  schema: JSONSchema; value: JsonObject; onChange: (config: JsonObject) => void; nodeId: string; models: string[];
  refused: ReadonlySet<string> | null; flat?: boolean; testId?: string;
  /** Field titles in the UI language (property name -> title); English where missing. */
  titles?: FieldTitles;
  /** Enum value labels in the UI language (value -> label); the value itself where missing. */
  values?: FieldTitles;
  /** Field help in the UI language (English help -> help); English where missing. */
  help?: FieldTitles }) {
  const t = useT();
  const required = new Set(schema.required ?? []);
  const entries = Object.entries(schema.properties ?? {});
  const main = flat ? entries : entries.filter(([k, p]) => !advanced(k, p, schema, required));
  const more = flat ? [] : entries.filter(([k, p]) => advanced(k, p, schema, required));
  const field = ([key, prop]: [string, JSONSchema]) => (
    <Field key={key} name={key} path={key} schema={prop} value={value[key]} required={required.has(key)}
      onChange={(v) => {
        const next = { ...value };
        if (v === undefined) delete next[key];
        else next[key] = v;
        onChange(next);
      }} />
  );
  return (
    <Ctx.Provider value={{ root: schema, nodeId, config: value, models, refused, titles, values, help }}>
      <div className="schema-form" data-testid={testId ?? 'config-form'}>
        {main.map(field)}
        {more.length > 0 && (
          <details className="advanced">
            <summary>{t('config.advanced')}</summary>
            {more.map(field)}
          </details>
        )}
      </div>
    </Ctx.Provider>
  );
});
