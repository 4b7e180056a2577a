/** The selected node's settings (placeholder until the schema form lands). */
import { useT } from '../i18n';
import { selectedFlowNodes, useEditor } from '../store/editor';

export function ConfigPanel() {
  const t = useT();
  const selected = useEditor((s) => selectedFlowNodes(s.nodes).map((n) => n.id).join('\u0000'));
  const ids = selected ? selected.split('\u0000') : [];
  if (!ids.length) return <p className="muted">{t('config.empty')}</p>;
  if (ids.length > 1) return <p className="muted">{t('config.multi', { count: ids.length })}</p>;
  return <div data-testid="config-panel">{ids[0]}</div>;
}
