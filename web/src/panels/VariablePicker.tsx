/**
 * The variable picker: what the node may read (lib/scope.ts) - its upstream nodes'
 * outputs, the global inputs, the run variables and the system variables - grouped,
 * with a filter. Picking calls `onPick` with the reference path.
 */
import { useMemo, useState } from 'react';
import { useT, type MessageKey } from '../i18n';
import { availableVariables, type ScopeEntry } from '../lib/scope';
import { nodeOutputs } from '../lib/shape';
import { isFlowNode } from '../lib/serialize';
import { useCatalog } from '../store/catalog';
import { currentDoc, useEditor } from '../store/editor';
import { useNodeTitles } from '../run/titles';

/** The variables `nodeId` may read now (computed on demand, not on every render). */
export function variablesFor(nodeId: string): ScopeEntry[] {
  const state = useEditor.getState();
  const byKind = useCatalog.getState().byKind;
  const nodes = new Map(state.nodes.filter(isFlowNode).map((n) => [n.id, n.data.node]));
  const doc = currentDoc();
  const inputTypes = new Map((doc.inputs ?? []).map((v) => [v.name, v.type ?? 'string']));
  const system = useCatalog.getState().systemVariables;
  const entries = availableVariables(doc, nodeId, Object.keys(system), (id) => {
    const node = nodes.get(id);
    return node ? nodeOutputs(node, byKind[node.type], state.shapes) : [];
  }, (id, output) => {
    // The server's types for this node, else the kind's fixed outputs or the workflow's inputs.
    const kind = byKind[nodes.get(id)?.type ?? ''];
    return state.shapes.types?.[id]?.[output] ?? (kind?.traits?.entry ? inputTypes.get(output) : kind?.outputs?.[output]);
  });
  return entries.map((e) => (e.group === 'sys' ? { ...e, type: system[e.path.slice(4)] } : e));
}

/** The node a node reference reads (`node.output...`, or `nodes.<id>.output...`). */
function nodeOf(path: string): string {
  const parts = path.split('.');
  return parts[0] === 'nodes' ? parts[1] ?? '' : parts[0];
}

const GROUPS: [ScopeEntry['group'], MessageKey][] = [
  ['node', 'vars.nodes'], ['inputs', 'vars.inputs'], ['vars', 'vars.variables'], ['sys', 'vars.system'],
];

export function VariablePicker({ nodeId, onPick, onClose, testId }: { nodeId: string; onPick: (path: string) => void;
  onClose: () => void; testId?: string }) {
  const t = useT();
  const titles = useNodeTitles();
  const [query, setQuery] = useState('');
  const all = useMemo(() => variablesFor(nodeId), [nodeId]);
  const q = query.trim().toLowerCase();
  // a node is found by its title too
  const shown = q ? all.filter((v) => v.path.toLowerCase().includes(q)
    || (v.group === 'node' && (titles[nodeOf(v.path)] ?? '').toLowerCase().includes(q))) : all;
  return (
    <div className="var-picker" data-testid={testId ?? 'variable-picker'} onKeyDown={(e) => { if (e.key === 'Escape') onClose(); }}>
      <input type="search" autoFocus value={query} placeholder={t('vars.search')} onChange={(e) => setQuery(e.target.value)} />
      {shown.length === 0 && <p className="muted">{t('vars.empty')}</p>}
      {GROUPS.map(([group, label]) => {
        const items = shown.filter((v) => v.group === group);
        if (!items.length) return null;
        return (
          <section key={group}>
            <h5>{t(label)}</h5>
            {items.map((v) => (
              <button type="button" key={v.path} className="var-item" data-testid={`var-${v.path}`}
                onClick={() => { onPick(v.path); onClose(); }}>
                {v.group === 'node' && titles[nodeOf(v.path)] && <span className="var-title">{titles[nodeOf(v.path)]} </span>}
                <code>{v.path}</code>{v.type && <span className="muted"> {v.type}</span>}
              </button>
            ))}
          </section>
        );
      })}
    </div>
  );
}
