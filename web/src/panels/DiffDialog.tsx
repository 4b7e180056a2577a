/** Compares two sides (a published version or the draft, each picked in the dialog):
 * the workflow's own changed fields, then each added, removed or changed node under its
 * title with every changed field as a before / after pair, then the connections added
 * or removed, and the nodes that only moved. */
import { useEffect, useMemo, useRef, useState } from 'react';
import { api } from '../api/client';
import type { WorkflowVersion } from '../api/types';
import { useLanguage, useT } from '../i18n';
import { diffWorkflows, excerpts, valueText, type Change, type EdgeEnds, type FieldChange, type NodeRef } from '../lib/diff';
import { kindText } from '../lib/kindLabel';
import type { WorkflowDoc } from '../lib/workflow';
import { useCatalog } from '../store/catalog';
import { currentDoc } from '../store/editor';
import { Dialog } from './Dialog';

/** A side of the comparison: a published version's number, or the draft. */
export type Side = number | 'draft';

/** Values longer than this are shown cut, the whole one on request. */
const SHORT = 120;

type NodeChange = Extract<Change, { type: 'node_added' | 'node_removed' | 'node_changed' }>;
type EdgeChange = Extract<Change, { type: 'edge_added' | 'edge_removed' }>;
const STATUS_LABEL = { added: 'diff.added', removed: 'diff.removed', changed: 'diff.changed' } as const;

function FieldRow({ field }: { field: FieldChange }) {
  const t = useT();
  const [open, setOpen] = useState(false);
  const full = [valueText(field.before), valueText(field.after)];
  const short = excerpts(full[0], full[1], SHORT);
  const cut = short[0].cut || short[1].cut;
  const block = (side: 0 | 1) => {
    const value = side === 0 ? field.before : field.after;
    return (
      <pre className={side === 0 ? 'diff-before' : 'diff-after'} data-testid={side === 0 ? 'diff-before' : 'diff-after'}
        aria-label={side === 0 ? t('diff.before') : t('diff.after')}>
        {value === undefined ? <em>{t('diff.unset')}</em> : open ? full[side] : short[side].text}
      </pre>
    );
  };
  return (
    <li className="diff-field" data-testid="diff-field" data-path={field.path}>
      <code className="diff-path">{field.path}</code>
      <div className="diff-values">{block(0)}{block(1)}</div>
      {cut && <button type="button" className="link small" onClick={() => setOpen(!open)}>
        {open ? t('diff.showLess') : t('diff.showAll')}</button>}
    </li>
  );
}

function NodeGroup({ change }: { change: NodeChange }) {
  const t = useT();
  const lang = useLanguage((s) => s.lang);
  const kind = useCatalog((s) => s.byKind[change.node.type]);
  const status = change.type === 'node_added' ? 'added' : change.type === 'node_removed' ? 'removed' : 'changed';
  const { id, title } = change.node;
  return (
    <section className={`diff-node ${status}`} data-testid={`diff-node-${id}`}>
      <div className="diff-node-head">
        <span className={`badge diff-${status}`}>{t(STATUS_LABEL[status])}</span>{' '}
        <strong>{title}</strong>{' '}
        <span className="muted small">{title !== id ? `${id} · ` : ''}{kind ? kindText(kind, lang).title : change.node.type}</span>
        {change.type === 'node_changed' && change.moved && <span className="muted small"> · {t('diff.alsoMoved')}</span>}
      </div>
      {change.type === 'node_changed' && (
        <ul className="diff-fields">{change.fields.map((f) => <FieldRow key={f.path} field={f} />)}</ul>
      )}
    </section>
  );
}

function EdgeRow({ change, titleOf }: { change: EdgeChange; titleOf: (id: string) => string }) {
  const t = useT();
  const e: EdgeEnds = change.edge;
  const status = change.type === 'edge_added' ? 'added' : 'removed';
  return (
    <li className={`diff-edge ${status}`} data-testid="diff-edge">
      <span className={`badge diff-${status}`}>{t(STATUS_LABEL[status])}</span>{' '}
      {titleOf(e.source)}{e.sourceHandle !== 'out' && <code> {e.sourceHandle}</code>}
      {' → '}
      {titleOf(e.target)}{e.targetHandle !== 'in' && <code> {e.targetHandle}</code>}
    </li>
  );
}

/** The changes, grouped: workflow fields, nodes, connections, moved-only nodes. */
function ChangeList({ changes, titleOf }: { changes: Change[]; titleOf: (id: string) => string }) {
  const t = useT();
  const workflow = changes.filter((c) => c.type === 'workflow_changed').map((c) => c.field);
  const nodes = changes.filter((c): c is NodeChange => c.type === 'node_added' || c.type === 'node_removed'
    || c.type === 'node_changed');
  const edges = changes.filter((c): c is EdgeChange => c.type === 'edge_added' || c.type === 'edge_removed');
  const moved = changes.flatMap((c): NodeRef[] => (c.type === 'node_moved' ? [c.node] : []));
  if (!workflow.length && !nodes.length && !edges.length) {
    return (
      <>
        <p data-testid="diff-empty">{t('diff.none')}</p>
        {moved.length > 0 && <p className="muted small">{t('diff.movedOnly', { nodes: moved.map((n) => n.title).join(', ') })}</p>}
      </>
    );
  }
  return (
    <div data-testid="diff">
      {workflow.length > 0 && (
        <section className="diff-section" data-testid="diff-workflow">
          <h3>{t('diff.workflow')}</h3>
          <ul className="diff-fields">{workflow.map((f) => <FieldRow key={f.path} field={f} />)}</ul>
        </section>
      )}
      {nodes.length > 0 && (
        <section className="diff-section">
          <h3>{t('diff.nodes', { count: nodes.length })}</h3>
          {nodes.map((c) => <NodeGroup key={`${c.type}:${c.node.id}`} change={c} />)}
        </section>
      )}
      {edges.length > 0 && (
        <section className="diff-section">
          <h3>{t('diff.edges', { count: edges.length })}</h3>
          <ul className="diff-edges">{edges.map((c) => <EdgeRow key={`${c.type}:${c.edge.id}:${c.edge.source}:${c.edge.sourceHandle}:${c.edge.target}`}
            change={c} titleOf={titleOf} />)}</ul>
        </section>
      )}
      {moved.length > 0 && <p className="muted small">{t('diff.movedOnly', { nodes: moved.map((n) => n.title).join(', ') })}</p>}
    </div>
  );
}

function SidePicker({ value, onChange, versions, label, testId }: { value: Side; onChange: (s: Side) => void;
  versions: WorkflowVersion[]; label: string; testId: string }) {
  const t = useT();
  return (
    <label className="diff-side">
      <span className="field-label">{label}</span>
      <select data-testid={testId} value={String(value)}
        onChange={(e) => onChange(e.target.value === 'draft' ? 'draft' : Number(e.target.value))}>
        <option value="draft">{t('diff.draft')}</option>
        {[...versions].reverse().map((v) => (
          <option key={v.version} value={String(v.version)}>{t('diff.version', { version: v.version })}</option>
        ))}
      </select>
    </label>
  );
}

/** The diff dialog, opened on `from` against the draft; either side can be changed. */
export function DiffDialog({ workflowId, versions, from: initialFrom, onClose }: { workflowId: string;
  versions: WorkflowVersion[]; from: Side; onClose: () => void }) {
  const t = useT();
  const [from, setFrom] = useState<Side>(initialFrom);
  const [to, setTo] = useState<Side>('draft');
  const [result, setResult] = useState<{ key: string; changes: Change[]; docs: WorkflowDoc[] } | null>(null);
  const [error, setError] = useState<string | null>(null);
  // Published versions never change: each is fetched once per dialog. The draft is
  // taken as it is when the dialog opens.
  const cache = useRef(new Map<number, Promise<WorkflowDoc>>());
  const draft = useMemo(() => currentDoc(), []);
  const key = `${from}>${to}`;

  useEffect(() => {
    let live = true;
    const load = (side: Side): Promise<WorkflowDoc> => {
      if (side === 'draft') return Promise.resolve(draft);
      let doc = cache.current.get(side);
      if (!doc) {
        doc = api.exportWorkflow(workflowId, side) as Promise<WorkflowDoc>;
        doc.catch(() => cache.current.delete(side));
        cache.current.set(side, doc);
      }
      return doc;
    };
    Promise.all([load(from), load(to)]).then(([a, b]) => {
      if (live) {
        setResult({ key, changes: diffWorkflows(a, b, { moves: true }), docs: [b, a] });
        setError(null);
      }
    }, (e: Error) => { if (live) setError(e.message); });
    return () => { live = false; };
  }, [workflowId, draft, from, to, key]);

  const titleOf = useMemo(() => {
    const titles = new Map<string, string>();
    for (const doc of result?.docs ?? []) for (const n of doc.nodes) if (!titles.has(n.id)) titles.set(n.id, n.name || n.id);
    return (id: string) => titles.get(id) ?? id;
  }, [result]);

  return (
    <Dialog title={t('diff.title')} onClose={onClose} testId="diff-dialog">
      <div className="diff">
        <div className="diff-pick">
          <SidePicker value={from} onChange={setFrom} versions={versions} label={t('diff.from')} testId="diff-from" />
          <button type="button" className="small" title={t('diff.swap')} aria-label={t('diff.swap')}
            data-testid="diff-swap" onClick={() => { setFrom(to); setTo(from); }}>⇄</button>
          <SidePicker value={to} onChange={setTo} versions={versions} label={t('diff.to')} testId="diff-to" />
        </div>
        {error && <div className="error" role="alert">{error}</div>}
        {!error && (result?.key === key
          ? <ChangeList changes={result.changes} titleOf={titleOf} />
          : <p className="muted">{t('diff.loading')}</p>)}
      </div>
    </Dialog>
  );
}
