/**
 * RESERVED for the run panel (run with inputs, chat preview, trace, run history,
 * re-run from a node). A placeholder until it is built; the editor renders it in the
 * bottom slot when the Run button is pressed.
 *
 * What the editor offers it: `props.workflowId`, `props.getDocument()` (the current
 * draft document), `props.canRun` (false while the checklist has errors), `onClose`,
 * `api` from src/api/client.ts, and `useRunStatus` (src/store/runStatus.ts) to show
 * each node's run status as a badge on the canvas.
 */
import type { WorkflowDoc } from '../lib/workflow';
import { useT } from '../i18n';

export interface RunPanelProps {
  workflowId: string;
  getDocument: () => WorkflowDoc;
  canRun: boolean;
  onClose: () => void;
}

export function RunPanel(props: RunPanelProps) {
  const t = useT();
  return (
    <div className="run-panel" data-testid="run-panel">
      <strong>{t('run.placeholder')}</strong> <span className="muted">{props.workflowId}</span>
      <button type="button" className="link" onClick={props.onClose}>{t('common.close')}</button>
    </div>
  );
}
