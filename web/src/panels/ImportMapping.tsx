/**
 * The import dialog's mapping of what a file names that does not exist here: each model
 * the registry lacks (`unknown_model` in the report) and each dataset not mapped to one
 * of this tenant's (`unmapped_dataset`) gets a select of the local models or datasets;
 * "Import with these choices" imports the file again with `model_map` and `dataset_map`.
 *
 * The sources are read from the report's messages, whose wording the importer keeps
 * stable: "model 'X' is not in the model registry (known: a, b)" and "dataset 'X' is not
 * mapped". The local datasets come from `GET /v1/datasets`.
 */
import { useEffect, useState } from 'react';
import { request } from '../api/client';
import { useT } from '../i18n';

export interface ReportLine {
  code: string;
  message: string;
}

export interface ImportMaps {
  models: Record<string, string>;
  datasets: Record<string, string>;
}

/** The source models the registry lacks, with the registry's names. */
export function unknownModels(report: ReportLine[]): { source: string; known: string[] }[] {
  const out = new Map<string, string[]>();
  for (const r of report) {
    if (r.code !== 'unknown_model') continue;
    const source = r.message.match(/model '([^']+)' is not in the model registry/)?.[1];
    const known = r.message.match(/\(known: ([^)]*)\)/)?.[1]?.split(',').map((x) => x.trim()).filter(Boolean) ?? [];
    if (source && !out.has(source)) out.set(source, known);
  }
  return [...out].map(([source, known]) => ({ source, known }));
}

/** The source dataset ids the file names that are not mapped to a dataset here. */
export function unmappedDatasets(report: ReportLine[]): string[] {
  const out = new Set<string>();
  for (const r of report) {
    if (r.code !== 'unmapped_dataset') continue;
    const source = r.message.match(/dataset '([^']+)' is not mapped/)?.[1];
    if (source) out.add(source);
  }
  return [...out];
}

/** Whether the report names anything to map. */
export function needsMapping(report: ReportLine[]): boolean {
  return unknownModels(report).length > 0 || unmappedDatasets(report).length > 0;
}

interface DatasetChoice { id: string; name: string }

export function ImportMapping({ report, previous, onImport }: { report: ReportLine[]; previous: ImportMaps;
  onImport: (maps: ImportMaps) => void }) {
  const t = useT();
  const models = unknownModels(report);
  const sources = unmappedDatasets(report);
  const [modelMap, setModelMap] = useState<Record<string, string>>(() => ({ ...previous.models,
    ...Object.fromEntries(models.map((m) => [m.source, m.known.includes('default') ? 'default' : m.known[0] ?? ''])) }));
  const [datasetMap, setDatasetMap] = useState<Record<string, string>>(() => ({ ...previous.datasets }));
  const [datasets, setDatasets] = useState<DatasetChoice[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    if (!sources.length) return;
    request<{ datasets: DatasetChoice[] }>('GET', '/v1/datasets').then((r) => {
      setDatasets(r.datasets);
      setDatasetMap((m) => ({ ...Object.fromEntries(sources.map((s) => [s, r.datasets[0]?.id ?? ''])), ...m }));
    }, (e: Error) => setError(e.message));
  }, [sources.join('\u0000')]); // eslint-disable-line react-hooks/exhaustive-deps
  if (!models.length && !sources.length) return null;
  const chosen = Object.fromEntries(Object.entries(datasetMap).filter(([, v]) => v));
  return (
    <div className="model-map" data-testid="import-mapping">
      {models.length > 0 && (
        <div data-testid="import-model-map">
          <p>{t('import.modelMap')}</p>
          {models.map((m) => (
            <div key={m.source} className="row">
              <code>{m.source}</code> →
              <select data-testid={`import-model-${m.source}`} value={modelMap[m.source] ?? ''}
                onChange={(e) => setModelMap({ ...modelMap, [m.source]: e.target.value })}>
                {m.known.map((k) => <option key={k} value={k}>{k}</option>)}
              </select>
            </div>
          ))}
        </div>
      )}
      {sources.length > 0 && (
        <div data-testid="import-dataset-map">
          <p>{t('import.datasetMap')}</p>
          {error && <div className="error" role="alert">{error}</div>}
          {datasets?.length === 0 && <p className="muted" data-testid="import-no-datasets">{t('import.noDatasets')}</p>}
          {sources.map((source) => (
            <div key={source} className="row">
              <code>{source}</code> →
              <select data-testid={`import-dataset-${source}`} value={datasetMap[source] ?? ''}
                onChange={(e) => setDatasetMap({ ...datasetMap, [source]: e.target.value })}>
                <option value="">{t('import.datasetAsIs')}</option>
                {(datasets ?? []).map((d) => <option key={d.id} value={d.id}>{d.name} ({d.id})</option>)}
              </select>
            </div>
          ))}
        </div>
      )}
      <button type="button" className="primary" data-testid="import-with-models"
        onClick={() => onImport({ models: { ...previous.models, ...modelMap }, datasets: chosen })}>
        {t('import.retry')}</button>
    </div>
  );
}
