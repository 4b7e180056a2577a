/** The workflow's own settings (placeholder until the editor lands). */
import { useEditor } from '../store/editor';

export function WorkflowPanel() {
  const name = useEditor((s) => s.meta.name);
  return <div data-testid="workflow-panel">{name}</div>;
}
