/** The compiler's messages for the current document (errors first), in the UI language
 * (store/problemWords.ts); clicking one selects its node. Also lists nodes still reading
 * deleted nodes. */
import { useReactFlow } from '@xyflow/react';
import { useT } from '../i18n';
import { useEditor } from '../store/editor';
import { useProblemWords } from '../store/problemWords';

export function Checklist() {
  const t = useT();
  const problems = useEditor((s) => s.problems);
  const words = useProblemWords();
  const validating = useEditor((s) => s.validating);
  const validateError = useEditor((s) => s.validateError);
  const flagged = useEditor((s) => s.flagged);
  const select = useEditor((s) => s.select);
  const setPanel = useEditor((s) => s.setPanel);
  const { fitView } = useReactFlow();
  const focus = (id: string) => {
    select([id]);
    setPanel('config');
    void fitView({ nodes: [{ id }], duration: 300, maxZoom: 1.2 });
  };
  const errors = problems.filter((p) => p.severity === 'error');
  const warnings = problems.filter((p) => p.severity !== 'error');
  const flaggedList = Object.entries(flagged);
  return (
    <section className="checklist" data-testid="checklist" aria-live="polite">
      <h3>
        {t('checklist.title')}{' '}
        <span className="muted" data-testid="checklist-summary">
          {validating ? t('checklist.checking')
            : errors.length || warnings.length ? `${t('checklist.errors', { count: errors.length })} · ${t('checklist.warnings', { count: warnings.length })}`
              : t('checklist.ok')}
        </span>
      </h3>
      {validateError && <div className="error" role="alert">{t('checklist.unreachable', { message: validateError })}</div>}
      <ul>
        {[...errors, ...warnings].map((p, i) => (
          <li key={i} className={p.severity} data-testid="checklist-item" data-code={p.code} data-node={p.node_id ?? ''}>
            <button type="button" className="link" disabled={!p.node_id}
              onClick={() => { if (p.node_id) focus(p.node_id); }}>
              {p.node_id && <strong>{p.node_id}: </strong>}
              <span data-testid="checklist-text">{words(p)}</span>
              {p.path && <span className="muted"> ({p.path})</span>}
            </button>
          </li>
        ))}
        {flaggedList.map(([id, refs]) => (
          <li key={`flag-${id}`} className="error" data-testid="checklist-flagged" data-node={id}>
            <button type="button" className="link" onClick={() => focus(id)}>
              <strong>{id}: </strong>{t('checklist.refsFlagged', { refs: refs.join(', ') })}
            </button>
          </li>
        ))}
      </ul>
    </section>
  );
}
