/**
 * The dataset picker of a `datasets` field (the knowledge retrieval node, an agent's
 * dataset tools): the tenant's datasets by name, several at once; the stored value
 * stays the list of ids. An id the tenant has no dataset for (an imported workflow's,
 * a deleted dataset's) stays listed, flagged, until it is unticked.
 */
import './knowledge.css';
import { useEffect } from 'react';
import { useT } from '../i18n';
import { knowledgeHref } from '../route';
import { pickerOptions } from './citations';
import { useDatasets } from './store';

export function DatasetPicker({ value, onChange, testId }: { value: string[]; onChange: (ids: string[]) => void;
  testId: string }) {
  const t = useT();
  const { datasets, status, error, load } = useDatasets();
  useEffect(() => { void load(); }, [load]);
  const options = pickerOptions(datasets, value);
  const toggle = (id: string, on: boolean) =>
    onChange(on ? [...value.filter((v) => v !== id), id] : value.filter((v) => v !== id));
  return (
    <div className="dataset-picker" data-testid={testId}>
      {status === 'loading' && !datasets.length && <div className="muted small">{t('common.loading')}</div>}
      {error && <div className="error small">{error}</div>}
      {options.map((o) => (
        <label key={o.id} className={`check${o.missing ? ' error' : ''}`} data-testid={`${testId}-option-${o.id}`}
          title={o.id}>
          <input type="checkbox" checked={o.picked} onChange={(e) => toggle(o.id, e.target.checked)} />{' '}
          {o.missing ? t('knowledge.picker.missing', { id: o.id }) : o.name}
          {!o.missing && <span className="muted small"> {o.detail}</span>}
        </label>
      ))}
      {status === 'ready' && !datasets.length && (
        <div className="muted small">{t('knowledge.picker.none')}{' '}
          <a href={knowledgeHref()} target="_blank" rel="noreferrer">{t('knowledge.picker.create')}</a></div>
      )}
    </div>
  );
}
