/**
 * Importing a dropped or chosen file (FastGPT JSON, Dify YAML, Flowloom JSON) through
 * POST /v1/workflows/import: the report is shown (what was not converted, where the
 * models went, the commands that install the packages its code needs), models and datasets the file names that do not exist here are mapped to
 * local ones ({@link ImportMapping}), and the result is saved as a new workflow and
 * opened on request.
 */
import { useCallback, useRef, useState, type DragEvent, type ReactNode } from 'react';
import { api, ApiError } from '../api/client';
import type { WorkflowImported } from '../api/types';
import { useT } from '../i18n';
import { freshId } from '../lib/serialize';
import type { WorkflowDoc } from '../lib/workflow';
import { Dialog } from './Dialog';
import { ImportMapping, needsMapping, type ImportMaps } from './ImportMapping';
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

/** A drop zone around `children` that imports dropped files; `onOpen` gets the saved id. */
/** `chooser`: also a "Choose a file" button (a file dialog) besides dropping. */
export function ImportDropZone({ children, onOpen, onReplace, className, chooser }: { children: ReactNode;
  onOpen: (workflowId: string) => void; onReplace?: (doc: WorkflowDoc) => void; className?: string;
  chooser?: boolean }) {
  const t = useT();
  const [state, setState] = useState<ImportState>({ phase: 'idle' });
  const [over, setOver] = useState(false);
  const [opening, setOpening] = useState<string | null>(null);
  // the choices of the last import with mappings, kept when the file is imported again
  const [maps, setMaps] = useState<ImportMaps>({ models: {}, datasets: {} });
  const fileInput = useRef<HTMLInputElement>(null);
  const [secrets, setSecrets] = useState<Record<string, string>>({});

  const run = useCallback(async (file: File, allowPartial = false, chosen: ImportMaps = { models: {}, datasets: {} }) => {
    setState({ phase: 'busy', file });
    setMaps(chosen);
    try {
      setState({ phase: 'done', file, result: await api.importFile(file, { allowPartial, modelMap: chosen.models,
        datasetMap: chosen.datasets }) });
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
      {chooser && (
        <div className="row import-chooser">
          <button type="button" data-testid="import-choose" onClick={() => fileInput.current?.click()}>{t('import.choose')}</button>
          <input ref={fileInput} type="file" hidden data-testid="import-file" accept=".json,.yml,.yaml,.txt"
            onChange={(e) => {
              const file = e.target.files?.[0];
              e.target.value = '';
              if (file) void run(file);
            }} />
        </div>
      )}
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
          {(state.result.install_commands ?? []).length > 0 && (
            <p data-testid="import-packages">{t('import.packages', { commands: (state.result.install_commands ?? []).join('; ') })}</p>
          )}
          <Report items={state.result.report as unknown as ReportItem[]} />
          {needsMapping(state.result.report as unknown as ReportItem[]) && (
            <ImportMapping report={state.result.report as unknown as ReportItem[]} previous={maps}
              onImport={(chosen) => void run(state.file, state.result.partial, chosen)} />
          )}
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
          {needsMapping(state.report) && (
            <ImportMapping report={state.report} previous={maps} onImport={(chosen) => void run(state.file, false, chosen)} />
          )}
        </Dialog>
      )}
    </div>
  );
}
