/**
 * The workflow panel's conversation variables: name, type and default of each variable a
 * chat keeps across its turns (`conversation.NAME`, changed by a variable update node).
 */
import { useMemo, useState } from 'react';
import { useT } from '../i18n';
import { parseTyped, showTyped } from '../lib/convVars';
import { varTypes } from '../lib/shape';
import type { VarDecl } from '../lib/workflow';
import { useCatalog } from '../store/catalog';
import { useEditor } from '../store/editor';

/** The default's text box: kept as typed while it does not read as the type yet. */
function DefaultInput({ decl, onChange, testId }: { decl: VarDecl; onChange: (value: VarDecl['default']) => void;
  testId: string }) {
  const t = useT();
  const [text, setText] = useState(showTyped(decl.default));
  const parsed = parseTyped(decl.type, text);
  return (
    <>
      <input aria-label={t('convVars.default')} placeholder={t('convVars.default')} data-testid={testId} value={text}
        className={parsed.ok ? '' : 'invalid'} onChange={(e) => {
          setText(e.target.value);
          const next = parseTyped(decl.type, e.target.value);
          if (next.ok) onChange(next.value);
        }} />
      {!parsed.ok && <span className="error small">{t('convVars.notType', { type: parsed.error })}</span>}
    </>
  );
}

export function ConversationVarsSection() {
  const t = useT();
  const list = useEditor((s) => s.meta.conversation_variables) ?? [];
  const setMeta = useEditor((s) => s.setMeta);
  const kinds = useCatalog((s) => s.kinds);
  const types = useMemo(() => varTypes(kinds), [kinds]);
  const set = (next: VarDecl[]) => setMeta({ conversation_variables: next });
  const update = (i: number, patch: Partial<VarDecl>) => set(list.map((v, j) => (j === i ? { ...v, ...patch } : v)));
  const testId = 'workflow-conversation';
  return (
    <>
      <h4 title={t('convVars.help')}>{t('vars.conversation')}</h4>
      <div className="var-list" data-testid={testId}>
        {list.map((v, i) => (
          <div key={i} className="row var-row">
            <input aria-label={t('workflow.varName')} data-testid={`${testId}-name-${i}`} value={v.name}
              onChange={(e) => update(i, { name: e.target.value })} />
            <select aria-label={t('workflow.varType')} data-testid={`${testId}-type-${i}`} value={v.type ?? 'string'}
              onChange={(e) => update(i, { type: e.target.value, default: undefined })}>
              {(types.includes(v.type ?? 'string') ? types : [v.type ?? 'string', ...types]).map((ty) => (
                <option key={ty} value={ty}>{ty}</option>))}
            </select>
            <DefaultInput key={`${i}-${v.type ?? 'string'}`} decl={v} testId={`${testId}-default-${i}`}
              onChange={(value) => update(i, { default: value === null ? undefined : value })} />
            <button type="button" className="icon small" title={t('common.remove')}
              onClick={() => set(list.filter((_, j) => j !== i))}>×</button>
          </div>
        ))}
        <button type="button" className="small" data-testid={`${testId}-add`} onClick={() => {
          let n = list.length + 1;
          while (list.some((v) => v.name === `conv_${n}`)) n += 1;
          set([...list, { name: `conv_${n}`, type: 'string' }]);
        }}>+ {t('common.add')}</button>
      </div>
    </>
  );
}
