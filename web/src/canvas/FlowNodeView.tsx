/**
 * A workflow node on the canvas: icon, title (double-click to rename), kind, a run
 * status badge (written by the run panel), a validation badge, the input handle and
 * one output handle per branch (from the node's config and the catalog, see
 * lib/shape.ts). Nodes with graph tools get a handle per tool and one to attach a new
 * tool; containers (iteration, loop, tool call, agent) draw their body as a frame.
 *
 * Memoised, and every store read is a narrow selector returning a primitive or a
 * shared array, so moving one node re-renders only that node.
 */
import { Handle, NodeResizer, Position, useUpdateNodeInternals, type NodeProps } from '@xyflow/react';
import { memo, useEffect, useMemo, useState, type MouseEvent } from 'react';
import { useLanguage, useT } from '../i18n';
import { BODY_HANDLE, NEW_TOOL_HANDLE, TOOL_HANDLE_PREFIX, TOOL_TARGET_HANDLE } from '../lib/connect';
import { kindText } from '../lib/kindLabel';
import type { FlowNode } from '../lib/serialize';
import { nodeHandles, toolField } from '../lib/shape';
import { nodeSummary } from '../lib/summary';
import { listedTools } from '../lib/toolList';
import type { JsonObject } from '../lib/workflow';
import { useDatasets } from '../knowledge/store';
import { useCatalog } from '../store/catalog';
import { useEditor } from '../store/editor';
import { useRunStatus } from '../store/runStatus';
import { KindIcon } from './icons';

const EMPTY: string[] = [];

function Title({ id, name }: { id: string; name: string }) {
  const t = useT();
  const [editing, setEditing] = useState(false);
  const [value, setValue] = useState(name);
  const updateNode = useEditor((s) => s.updateNode);
  if (editing) {
    const done = () => {
      setEditing(false);
      if (value.trim() !== name) updateNode(id, { name: value.trim() });
    };
    return (
      <input className="node-title-input nodrag" data-testid={`node-title-input-${id}`} autoFocus value={value}
        onChange={(e) => setValue(e.target.value)} onBlur={done}
        onKeyDown={(e) => {
          if (e.key === 'Enter') done();
          if (e.key === 'Escape') { setValue(name); setEditing(false); }
          e.stopPropagation();
        }} />
    );
  }
  return (
    <span className="node-title" title={`${name || id}\n${t('node.renameHint')}`} data-testid={`node-title-${id}`}
      onDoubleClick={(e) => { e.stopPropagation(); setValue(name); setEditing(true); }}>
      {name || id}
    </span>
  );
}

function FlowNodeViewImpl({ id, data, selected, parentId }: NodeProps<FlowNode>) {
  const t = useT();
  const node = data.node;
  const kind = useCatalog((s) => s.byKind[node.type]);
  const lang = useLanguage((s) => s.lang);
  const kindTitle = kind ? kindText(kind, lang).title : node.type;
  const shapeHandles = useEditor((s) => s.shapes.handles[id] ?? EMPTY);
  const errors = useEditor((s) => s.problemIndex[id]?.errors ?? 0);
  const warnings = useEditor((s) => s.problemIndex[id]?.warnings ?? 0);
  const problemText = useEditor((s) => s.problemIndex[id]?.text ?? '');
  const flagged = useEditor((s) => (s.flagged[id] ? s.flagged[id].join(', ') : ''));
  const setQuickAdd = useEditor((s) => s.setQuickAdd);
  // Only body nodes look up their container (a find over the nodes; top-level nodes skip it).
  const parentType = useEditor((s) => {
    if (!parentId) return '';
    const parent = s.nodes.find((n) => n.id === parentId);
    return parent && parent.type === 'flow' ? (parent.data as FlowNode['data']).node.type : '';
  });
  const toolHost = useCatalog((s) => !!parentType && !!toolField(s.byKind[parentType]));
  const run = useRunStatus((s) => s.byNode[id]);
  // unique: while two categories share an id the compiler lists it twice, and a
  // repeated React key would leave a stale handle on the node after the fix
  const handles = useMemo(() => [...new Set(nodeHandles(node, kind,
    { handles: shapeHandles.length ? { [id]: shapeHandles } : {}, outputs: {} }))], [node, kind, shapeHandles, id]);
  // React Flow measures handle positions once per node size; handles renamed or added
  // in place (a category id edited) must be measured again or they cannot be connected
  const updateNodeInternals = useUpdateNodeInternals();
  const handleKey = handles.join('\u0000');
  useEffect(() => updateNodeInternals(id), [handleKey, id, updateNodeInternals]);
  const tools = useMemo(() => {
    const field = toolField(kind);
    const list = field ? node.config?.[field] : null;
    return field ? (Array.isArray(list) ? (list as JsonObject[]).map((x) => String(x?.name ?? '')) : []) : null;
  }, [kind, node.config]);
  // the tools besides graph tools (builtin, HTTP, workflows, knowledge, MCP): listed on the card
  const otherTools = useMemo(() => (toolField(kind) ? listedTools(node.config) : []), [kind, node.config]);
  // what the node does (model, request, branch count): one muted line, see lib/summary.ts
  // a knowledge search names its datasets (the list is loaded once a node has datasets)
  const hasDatasets = Array.isArray(node.config?.datasets) && (node.config?.datasets as unknown[]).length > 0;
  const datasets = useDatasets((s) => s.datasets);
  const loadDatasets = useDatasets((s) => s.load);
  const datasetStatus = useDatasets((s) => s.status);
  useEffect(() => { if (hasDatasets && datasetStatus === 'idle') void loadDatasets(); },
    [hasDatasets, datasetStatus, loadDatasets]);
  const summary = useMemo(() => nodeSummary(node.config, kind, lang, t,
    (dsId) => datasets.find((d) => d.id === dsId)?.name), [node.config, kind, lang, t, datasets]);
  const container = !!kind?.traits?.container;
  const entry = !!kind?.traits?.entry;
  const branching = handles.length > 1;

  const openQuickAdd = (e: MouseEvent, handle: string) => {
    e.stopPropagation();
    setQuickAdd({ node: id, handle, x: e.clientX, y: e.clientY });
  };

  return (
    <div className={`flow-node${container ? ' container' : ''}${selected ? ' selected' : ''}${errors ? ' has-errors' : ''}`}
      data-testid={`node-${id}`} data-kind={node.type}>
      {container && selected && <NodeResizer minWidth={320} minHeight={200} />}
      <div className="node-card" title={node.description || undefined}>
        {!entry && <Handle type="target" position={Position.Left} id="in" className="handle-in"
          data-testid={`handle-${id}-in`} />}
        {toolHost && <Handle type="target" position={Position.Top} id={TOOL_TARGET_HANDLE} className="handle-tool-in"
          data-testid={`handle-${id}-tool-in`} />}
        {/* on the card's top edge, so the title keeps the card's width */}
        {run && <span className={`badge run-badge run-${run.status}`} data-testid={`node-status-${id}`} title={run.detail}>{run.label ?? run.status}</span>}
        <div className="node-head">
          <KindIcon icon={kind?.icon ?? ''} title={kindTitle} />
          <Title id={id} name={node.name ?? ''} />
          {(errors > 0 || warnings > 0 || flagged) && (
            <span className={`badge ${errors || flagged ? 'error' : 'warning'}`} data-testid={`node-badge-${id}`}
              title={[errors ? t('node.errors', { count: errors }) : '', warnings ? t('node.warnings', { count: warnings }) : '',
                flagged ? `${t('node.flagged')}: ${flagged}` : '', problemText].filter(Boolean).join('\n')}>
              {errors || (flagged ? '!' : warnings)}
            </span>
          )}
        </div>
        {summary && <div className="node-summary" data-testid={`node-summary-${id}`} title={summary}>{summary}</div>}
        <div className="node-kind">{kindTitle}<span className="node-id"> · {id}</span></div>
        <div className={`node-handles${branching ? ' branching' : ''}`}>
          {handles.map((h) => (
            <div key={h} className={`handle-row${h === 'error' ? ' error-branch' : ''}`}>
              {branching && <span className="handle-label">{h}</span>}
              <Handle type="source" position={Position.Right} id={h} className="handle-out"
                data-testid={`handle-${id}-${h}`} title={t('node.addNext')} onClick={(e) => openQuickAdd(e, h)} />
            </div>
          ))}
        </div>
        {tools && (
          <div className="node-tools">
            {tools.map((name) => (
              <div key={name} className="handle-row tool">
                <span className="handle-label">⚒ {name}</span>
                <Handle type="source" position={Position.Bottom} id={`${TOOL_HANDLE_PREFIX}${name}`} className="handle-tool"
                  data-testid={`handle-${id}-tool-${name}`} />
              </div>
            ))}
            {otherTools.length > 0 && (
              <ul className="node-tool-list" data-testid={`node-tools-${id}`}>
                {otherTools.map((tool) => (
                  <li key={`${tool.source}:${tool.name}`} data-source={tool.source} title={t(`node.toolSource.${tool.source}`)}>
                    ⚒ {tool.name}</li>
                ))}
              </ul>
            )}
            <div className="handle-row tool">
              <span className="handle-label">+ {t('node.addTool')}</span>
              <Handle type="source" position={Position.Bottom} id={NEW_TOOL_HANDLE} className="handle-tool"
                data-testid={`handle-${id}-tool-new`} />
            </div>
          </div>
        )}
      </div>
      {container && !tools && (
        <Handle type="source" position={Position.Left} id={BODY_HANDLE} className="handle-body"
          data-testid={`handle-${id}-body`} title={t('node.addNext')} onClick={(e) => openQuickAdd(e, BODY_HANDLE)} />
      )}
      {container && <div className="node-body" data-testid={`node-body-${id}`}>{t('node.body')}</div>}
    </div>
  );
}

export const FlowNodeView = memo(FlowNodeViewImpl);
