/**
 * The variable picker: what the node may read in the field being edited - the outputs
 * of the nodes it may read, the global inputs, the conversation and run variables and
 * the system variables - grouped, with a filter. The server answers it with the
 * compiler's own rule (lib/scope.ts), for the document as it is on the canvas now.
 * Picking calls `onPick` with the reference path.
 */
import { useEffect, useState } from 'react';
import { api } from '../api/client';
import { useT, type MessageKey } from '../i18n';
import { configField, entriesOf, SCOPE_GROUPS, type ScopeEntry } from '../lib/scope';
import { currentDoc } from '../store/editor';
import { useNodeTitles } from '../run/titles';

const LABELS: Record<(typeof SCOPE_GROUPS)[number], MessageKey> = {
  node: 'vars.nodes', inputs: 'vars.inputs', conversation: 'vars.conversation', vars: 'vars.variables', env: 'env.group',
  sys: 'vars.system',
};

/** The scope of `nodeId` in `field`, asked when the picker opens (null while asked). */
function useScope(nodeId: string, field: string | null): { entries: ScopeEntry[] | null; error: string | null } {
  const [state, setState] = useState<{ entries: ScopeEntry[] | null; error: string | null }>({ entries: null, error: null });
  useEffect(() => {
    const abort = new AbortController();
    api.scope(currentDoc(), nodeId, field, abort.signal)
      .then((answer) => setState({ entries: answer.entries, error: null }))
      .catch((err: unknown) => {
        if (!abort.signal.aborted) setState({ entries: [], error: err instanceof Error ? err.message : String(err) });
      });
    return () => abort.abort();
  }, [nodeId, field]);
  return state;
}

/** The node a node reference reads (`node.output...`, or `nodes.<id>.output...`). */
function nodeOf(path: string): string {
  const parts = path.split('.');
  return parts[0] === 'nodes' ? parts[1] ?? '' : parts[0];
}

export function VariablePicker({ nodeId, fieldPath, onPick, onClose, testId }: { nodeId: string; fieldPath?: string;
  onPick: (path: string) => void; onClose: () => void; testId?: string }) {
  const t = useT();
  const titles = useNodeTitles();
  const [query, setQuery] = useState('');
  const { entries, error } = useScope(nodeId, configField(fieldPath));
  const shown = entries ?? [];
  // a node's outputs are found by the node's title too
  const matching = (group: (typeof SCOPE_GROUPS)[number]): ScopeEntry[] => {
    const byPath = entriesOf(shown, group, query);
    const q = query.trim().toLowerCase();
    if (!q || group !== 'node') return byPath;
    return [...byPath, ...shown.filter((e) => e.group === group && !byPath.includes(e)
      && (titles[nodeOf(e.path)] ?? '').toLowerCase().includes(q))];
  };
  const anything = SCOPE_GROUPS.some((g) => matching(g).length > 0);
  return (
    <div className="var-picker" data-testid={testId ?? 'variable-picker'} data-ready={entries !== null ? 'true' : 'false'}
      onKeyDown={(e) => { if (e.key === 'Escape') onClose(); }}>
      <input type="search" autoFocus value={query} placeholder={t('vars.search')} onChange={(e) => setQuery(e.target.value)} />
      {entries === null && <p className="muted">{t('vars.loading')}</p>}
      {error && <p className="error small">{error}</p>}
      {entries !== null && !error && !anything && <p className="muted">{t('vars.empty')}</p>}
      {SCOPE_GROUPS.map((group) => {
        const items = matching(group);
        if (!items.length) return null;
        return (
          <section key={group}>
            <h5>{t(LABELS[group])}</h5>
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
