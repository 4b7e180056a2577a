/**
 * Importing a dropped file (FastGPT JSON, Dify YAML, Flowloom JSON) through
 * POST /v1/workflows/import: the report is shown (what was not converted, where the
 * models went), and the result is saved as a new workflow and opened on request.
 */
import { useCallback, useState, type DragEvent, type ReactNode } from 'react';
import { api, ApiError } from '../api/client';
import type { WorkflowImported } from '../api/types';
import { useT } from '../i18n';
import { freshId } from '../lib/serialize';
import type { WorkflowDoc } from '../lib/workflow';
import { Dialog } from './Dialog';
import { ImportSecrets } from './EnvironmentSection';

interface ReportItem {
  code: string;
  message: string;
  node_id?: string | null;
  source_type?: string | null;
  severity?: string;
  flowloom_id?: string | null;
}

type ImportState =
  | { phase: 'idle' }
  | { phase: 'busy'; file: File }
  | { phase: 'done'; file: File; result: WorkflowImported }
  | { phase: 'failed'; file: File; message: string; report: ReportItem[] };

function Report({ items }: { items: ReportItem[] }) {
  if (!items.length) return null;
  return (
    <ul className="report" data-testid="import-report-items">
      {items.map((r, i) => (
        <li key={i} className={r.severity === 'warning' ? 'warning' : 'error'}>
          <code>{r.code}</code>{' '}
          {r.node_id && <strong>{r.node_id}{r.source_type ? ` (${r.source_type})` : ''}{r.flowloom_id && r.flowloom_id !== r.node_id ? ` → ${r.flowloom_id}` : ''}: </strong>}
          {r.message}
        </li>
      ))}
    </ul>
  );
}

/** The source models the registry lacks, with the registry's names, read from the
 * report's `unknown_model` messages ("model 'X' is not in the model registry (known: a, b)"). */
export function unknownModels(report: ReportItem[]): { source: string; known: string[] }[] {
  const out = new Map<string, string[]>();
  for (const r of report) {
    if (r.code !== 'unknown_model') continue;
    const source = r.message.match(/model '([^']+)' is not in the model registry/)?.[1];
    const known = r.message.match(/\(known: ([^)]*)\)/)?.[1]?.split(',').map((x) => x.trim()).filter(Boolean) ?? [];
    if (source && !out.has(source)) out.set(source, known);
  }
  return [...out].map(([source, known]) => ({ source, known }));
}

function ModelMap({ models, onImport }: { models: { source: string; known: string[] }[];
  onImport: (map: Record<string, string>) => void }) {
  const t = useT();
  const [map, setMap] = useState<Record<string, string>>(
    () => Object.fromEntries(models.map((m) => [m.source, m.known.includes('default') ? 'default' : m.known[0] ?? ''])));
  return (
    <div className="model-map" data-testid="import-model-map">
      <p>{t('import.modelMap')}</p>
      {models.map((m) => (
        <div key={m.source} className="row">
          <code>{m.source}</code> →
          <select data-testid={`import-model-${m.source}`} value={map[m.source] ?? ''}
            onChange={(e) => setMap({ ...map, [m.source]: e.target.value })}>
            {m.known.map((k) => <option key={k} value={k}>{k}</option>)}
          </select>
        </div>
      ))}
      <button type="button" className="primary" data-testid="import-with-models" onClick={() => onImport(map)}>
        {t('import.retry')}</button>
    </div>
  );
}

/** A drop zone around `children` that imports dropped files; `onOpen` gets the saved id. */
export function ImportDropZone({ children, onOpen, onReplace, className }: { children: ReactNode;
  onOpen: (workflowId: string) => void; onReplace?: (doc: WorkflowDoc) => void; className?: string }) {
  const t = useT();
  const [state, setState] = useState<ImportState>({ phase: 'idle' });
  const [over, setOver] = useState(false);
  const [opening, setOpening] = useState<string | null>(null);
  const [secrets, setSecrets] = useState<Record<string, string>>({});

  const run = useCallback(async (file: File, allowPartial = false, modelMap?: Record<string, string>) => {
    setState({ phase: 'busy', file });
    try {
      setState({ phase: 'done', file, result: await api.importFile(file, { allowPartial, modelMap }) });
    } catch (e) {
      const report = e instanceof ApiError && Array.isArray(e.problems) ? (e.problems as ReportItem[]) : [];
      // the report lists the problems below: the server's message alone above it
      setState({ phase: 'failed', file, message: report.length ? (e as ApiError).summary : (e as Error).message, report });
    }
  }, []);

  const onDrop = (e: DragEvent) => {
    if (!e.dataTransfer.types.includes('Files')) return;
    e.preventDefault();
    setOver(false);
    const file = e.dataTransfer.files[0];
    if (file) void run(file);
  };

  const open = async (doc: WorkflowDoc) => {
    setOpening(null);
    try {
      const taken = new Set((await api.listWorkflows()).workflows.map((w) => w.id));
      const id = taken.has(doc.id) ? freshId(doc.id, taken).replace(/[^A-Za-z0-9_-]/g, '_') : doc.id;
      const saved = await api.createWorkflow({ ...doc, id });
      const given = Object.fromEntries(Object.entries(secrets).filter(([, v]) => v));
      if (Object.keys(given).length) await api.setSecrets(saved.id, given);
      setSecrets({});
      setState({ phase: 'idle' });
      onOpen(saved.id);
    } catch (e) {
      setOpening((e as Error).message);
    }
  };

  return (
    <div className={`${className ?? ''} drop-zone${over ? ' over' : ''}`} data-testid="import-drop-zone"
      onDragOver={(e) => { if (e.dataTransfer.types.includes('Files')) { e.preventDefault(); setOver(true); } }}
      onDragLeave={() => setOver(false)} onDrop={onDrop}>
      {children}
      {over && <div className="drop-hint">{t('import.drop')}</div>}
      {state.phase === 'busy' && <div className="drop-hint">{t('common.loading')}</div>}
      {state.phase === 'done' && (
        <Dialog title={t('import.title')} testId="import-report" onClose={() => setState({ phase: 'idle' })}
          footer={<>
            {onReplace && <button type="button" data-testid="import-replace" onClick={() => {
              onReplace(state.result.workflow as unknown as WorkflowDoc);
              setState({ phase: 'idle' });
            }}>{t('import.replace')}</button>}
            <button type="button" className="primary" data-testid="import-open"
              onClick={() => void open(state.result.workflow as unknown as WorkflowDoc)}>{t('import.open')}</button>
          </>}>
          <p>{t('import.format', { format: state.result.source_format })}</p>
          <p>{state.result.partial ? t('import.partial') : t('import.clean')}</p>
          {Object.keys(state.result.models ?? {}).length > 0 && (
            <p>{t('import.models', { models: Object.entries(state.result.models ?? {}).map(([a, b]) => `${a} → ${b}`).join(', ') })}</p>
          )}
          <Report items={state.result.report as unknown as ReportItem[]} />
          <ImportSecrets names={state.result.secrets_needed ?? []} values={secrets} onChange={setSecrets} />
          {opening && <div className="error" role="alert">{opening}</div>}
        </Dialog>
      )}
      {state.phase === 'failed' && (
        <Dialog title={t('import.title')} testId="import-report" onClose={() => setState({ phase: 'idle' })}
          footer={state.report.length > 0 && (
            <button type="button" data-testid="import-allow-partial" onClick={() => void run(state.file, true)}>
              {t('import.allowPartial')}</button>)}>
          <div className="error" role="alert">{t('import.failed', { message: state.message })}</div>
          <Report items={state.report} />
          {unknownModels(state.report).length > 0 && (
            <ModelMap models={unknownModels(state.report)} onImport={(map) => void run(state.file, false, map)} />
          )}
        </Dialog>
      )}
    </div>
  );
}
