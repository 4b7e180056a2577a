/**
 * The selected node's settings: id (renaming rewrites every reference to it), title,
 * description, the config form generated from the kind's JSON Schema, and the
 * execution policy every node has (timeout, retries, error strategy).
 */
import { memo, useCallback, useLayoutEffect, useMemo, useRef, useState } from 'react';
import { useLanguage, useT } from '../i18n';
import { kindFieldHelp, kindFieldTitles, kindValueLabels, nodeFieldTitles } from '../lib/fieldLabel';
import { kindText } from '../lib/kindLabel';
import { SCOPE_PROBLEMS } from '../lib/scope';
import type { JSONSchema } from '../lib/schema';
import { isFlowNode, type FlowNode } from '../lib/serialize';
import type { JsonObject, WorkflowNode } from '../lib/workflow';
import { useCatalog } from '../store/catalog';
import { useEditor } from '../store/editor';
import { KindIcon } from '../canvas/icons';
import { NodeRunSection } from '../run/NodeRunPanel';
import { SchemaForm } from './SchemaForm';

/** The fields of the node-level schema the policy form edits: all but those the panel
 * or the canvas edit themselves (title, description, position, body membership). */
const OWN_FIELDS = new Set(['name', 'description', 'position', 'parent']);

function policyOf(schema: JSONSchema): JSONSchema | null {
  const props = Object.entries(schema.properties ?? {}).filter(([k]) => !OWN_FIELDS.has(k));
  return props.length ? { ...schema, properties: Object.fromEntries(props), required: [] } : null;
}

function IdField({ id }: { id: string }) {
  const t = useT();
  const renameNode = useEditor((s) => s.renameNode);
  const [value, setValue] = useState(id);
  const [error, setError] = useState<string | null>(null);
  const [last, setLast] = useState(id);
  if (last !== id) {
    setLast(id);
    setValue(id);
  }
  const commit = () => {
    const result = renameNode(id, value);
    setError(result === 'taken' ? t('config.idTaken') : null);
    if (result) setValue(id);
  };
  return (
    <div className="field">
      <label className="field-label" htmlFor="node-id">{t('config.id')}</label>
      <input id="node-id" data-testid="config-node-id" value={value} onChange={(e) => setValue(e.target.value)}
        onBlur={commit} onKeyDown={(e) => { if (e.key === 'Enter') commit(); }} />
      {error && <div className="error small">{error}</div>}
    </div>
  );
}

function modelsInUse(nodes: FlowNode[]): string[] {
  const out = new Set<string>();
  for (const n of nodes) {
    const m = n.data.node.config?.model;
    if (typeof m === 'string' && m) out.add(m);
  }
  return [...out].sort();
}

const NodeConfig = memo(function NodeConfig({ node }: { node: Omit<WorkflowNode, 'position'> }) {
  const t = useT();
  const kind = useCatalog((s) => s.byKind[node.type]);
  const lang = useLanguage((s) => s.lang);
  const kindLabel = kind ? kindText(kind, lang) : undefined;
  const setConfig = useEditor((s) => s.setConfig);
  const updateNode = useEditor((s) => s.updateNode);
  const setPanel = useEditor((s) => s.setPanel);
  const nodeCount = useEditor((s) => s.nodes.length);
  const onChange = useCallback((config: JsonObject) => setConfig(node.id, config), [setConfig, node.id]);
  const registry = useCatalog((s) => s.models);
  // Recomputed when nodes are added or removed (not on every keystroke
  // or drag): the store is read directly inside, the node count is the trigger.
  const models = useMemo(() => {
    void nodeCount;
    return [...new Set([...(registry ?? []), ...modelsInUse(useEditor.getState().nodes.filter(isFlowNode))])];
  }, [nodeCount, registry]);
  // The compiler's verdict on each reference of this node (the same rule the picker offers by).
  const problems = useEditor((s) => s.problems);
  const refused = useMemo(() => new Set(problems.filter((p) => p.node_id === node.id && p.path
    && SCOPE_PROBLEMS.has(p.code)).map((p) => p.path as string)), [problems, node.id]);
  const nodeFields = useCatalog((s) => s.nodeFieldsSchema);
  const nodeFieldLabels = useCatalog((s) => s.nodeFieldLabels);
  const nodeValueLabels = useCatalog((s) => s.nodeValueLabels);
  const nodeFieldHelp = useCatalog((s) => s.nodeFieldHelp);
  const policySchema = useMemo(() => policyOf(nodeFields), [nodeFields]);
  const onPolicy = useCallback((next: JsonObject) => {
    const patch: Record<string, unknown> = {};
    for (const key of Object.keys(policySchema?.properties ?? {})) patch[key] = next[key];
    updateNode(node.id, patch as Partial<WorkflowNode>);
  }, [policySchema, updateNode, node.id]);
  // Another node's form starts at its top (id, title), not at the scroll position the
  // previous, perhaps longer, form was left at: the side panel scrolls, not this form.
  const panelRef = useRef<HTMLDivElement>(null);
  useLayoutEffect(() => {
    const scroller = panelRef.current?.closest('.side-body');
    if (scroller) scroller.scrollTop = 0;
  }, [node.id]);
  return (
    <div className="config-panel" data-testid="config-panel" data-node={node.id} ref={panelRef}>
      <div className="config-head">
        <KindIcon icon={kind?.icon ?? ''} />
        <div>
          <strong>{kindLabel?.title ?? node.type}</strong>
          <div className="field-help">{(kindLabel?.description ?? '').split(/\n\s*\n/)[0].replace(/``/g, '')}</div>
        </div>
      </div>
      <IdField id={node.id} />
      <div className="field">
        <label className="field-label" htmlFor="node-name">{t('config.name')}</label>
        <input id="node-name" data-testid="config-node-name" value={node.name ?? ''}
          onChange={(e) => updateNode(node.id, { name: e.target.value })} />
      </div>
      <div className="field">
        <label className="field-label" htmlFor="node-description">{t('config.description')}</label>
        <input id="node-description" data-testid="config-node-description" value={node.description ?? ''}
          onChange={(e) => updateNode(node.id, { description: e.target.value || undefined })} />
      </div>
      {!!kind?.traits?.entry && (
        <button type="button" className="small" data-testid="config-edit-inputs" onClick={() => setPanel('workflow')}>
          {t('workflow.inputs')} →</button>
      )}
      {kind && Object.keys((kind.config_schema as JSONSchema).properties ?? {}).length > 0 && (
        <>
          <h4>{t('config.settings')}</h4>
          <SchemaForm schema={kind.config_schema as JSONSchema} value={node.config ?? {}} onChange={onChange}
            nodeId={node.id} models={models} refused={refused} titles={kindFieldTitles(kind, lang)}
            values={kindValueLabels(kind, lang)} help={kindFieldHelp(kind, lang)} />
        </>
      )}
      {policySchema && (
        <details className="advanced" data-testid="config-policy">
          <summary>{t('config.policy')}</summary>
          <SchemaForm schema={policySchema} value={node as unknown as JsonObject} onChange={onPolicy} nodeId={node.id}
            models={models} refused={refused} flat testId="config-policy-form"
            titles={nodeFieldTitles(nodeFieldLabels, lang)} values={nodeFieldTitles(nodeValueLabels, lang)}
            help={nodeFieldTitles(nodeFieldHelp, lang)} />
        </details>
      )}
      <NodeRunSection nodeId={node.id} />
    </div>
  );
});

export function ConfigPanel() {
  const t = useT();
  const selected = useEditor((s) => {
    let first: FlowNode | null = null;
    let count = 0;
    for (const n of s.nodes) {
      if (n.selected && isFlowNode(n)) {
        count += 1;
        first ??= n;
      }
    }
    return count === 1 ? first!.data.node : count;
  });
  if (selected === 0) return <p className="muted" data-testid="config-empty">{t('config.empty')}</p>;
  if (typeof selected === 'number') return <p className="muted">{t('config.multi', { count: selected })}</p>;
  return <NodeConfig key={selected.id} node={selected} />;
}
