/** The workflow's own settings: name, description, global inputs, run, conversation and environment variables. */
import { useMemo } from 'react';
import { useT } from '../i18n';
import { varTypes } from '../lib/shape';
import { useCatalog } from '../store/catalog';
import type { VarDecl } from '../lib/workflow';
import { useEditor } from '../store/editor';
import { ConversationVarsSection } from './ConversationVarsSection';
import { EnvironmentSection } from './EnvironmentSection';

function VarList({ field, testId }: { field: 'inputs' | 'variables'; testId: string }) {
  const t = useT();
  const list = useEditor((s) => s.meta[field]) ?? [];
  const setMeta = useEditor((s) => s.setMeta);
  const kinds = useCatalog((s) => s.kinds);
  const types = useMemo(() => varTypes(kinds), [kinds]);
  const set = (next: VarDecl[]) => setMeta({ [field]: next });
  const update = (i: number, patch: Partial<VarDecl>) => set(list.map((v, j) => (j === i ? { ...v, ...patch } : v)));
  return (
    <div className="var-list" data-testid={testId}>
      {list.map((v, i) => (
        <div key={i} className="row var-row">
          <input aria-label={t('workflow.varName')} data-testid={`${testId}-name-${i}`} value={v.name}
            onChange={(e) => update(i, { name: e.target.value })} />
          <select aria-label={t('workflow.varType')} value={v.type ?? 'string'} onChange={(e) => update(i, { type: e.target.value })}>
            {(types.includes(v.type ?? 'string') ? types : [v.type ?? 'string', ...types]).map((ty) => <option key={ty} value={ty}>{ty}</option>)}
          </select>
          {field === 'inputs' && (
            <label className="small"><input type="checkbox" checked={!!v.required}
              onChange={(e) => update(i, { required: e.target.checked || undefined })} /> {t('workflow.varRequired')}</label>
          )}
          <button type="button" className="icon small" title={t('common.remove')} onClick={() => set(list.filter((_, j) => j !== i))}>×</button>
        </div>
      ))}
      <button type="button" className="small" data-testid={`${testId}-add`} onClick={() => {
        let n = list.length + 1;
        while (list.some((v) => v.name === `${field === 'inputs' ? 'input' : 'var'}_${n}`)) n += 1;
        set([...list, { name: `${field === 'inputs' ? 'input' : 'var'}_${n}`, type: 'string' }]);
      }}>+ {t('common.add')}</button>
    </div>
  );
}

export function WorkflowPanel() {
  const t = useT();
  const meta = useEditor((s) => s.meta);
  const setMeta = useEditor((s) => s.setMeta);
  return (
    <div className="workflow-panel" data-testid="workflow-panel">
      <div className="field">
        <label className="field-label" htmlFor="wf-name">{t('workflow.name')}</label>
        <input id="wf-name" data-testid="workflow-name-input" value={meta.name ?? ''} onChange={(e) => setMeta({ name: e.target.value })} />
      </div>
      <div className="field">
        <label className="field-label" htmlFor="wf-desc">{t('workflow.description')}</label>
        <textarea id="wf-desc" value={meta.description ?? ''} onChange={(e) => setMeta({ description: e.target.value })} />
      </div>
      <h4>{t('workflow.inputs')}</h4>
      <VarList field="inputs" testId="workflow-inputs" />
      <h4>{t('workflow.variables')}</h4>
      <VarList field="variables" testId="workflow-variables" />
      <ConversationVarsSection />
      <h4>{t('env.title')}</h4>
      <EnvironmentSection />
    </div>
  );
}
