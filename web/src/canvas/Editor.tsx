/**
 * The editor of one workflow: toolbar, palette, canvas, side panel (config, workflow
 * settings, versions), checklist, the run panel slot, and the dialogs (publish,
 * conflict). Loads the draft, starts validation and autosave, and binds the keyboard
 * shortcuts (Ctrl+Z/Y undo/redo, Ctrl+C/V copy/paste, Ctrl+D duplicate, Delete, Ctrl+S).
 */
import { ReactFlowProvider, useReactFlow } from '@xyflow/react';
import { useCallback, useEffect, useState } from 'react';
import { api } from '../api/client';
import { useT } from '../i18n';
import type { WorkflowDoc } from '../lib/workflow';
import { Checklist } from '../panels/Checklist';
import { ConfigPanel } from '../panels/ConfigPanel';
import { ConflictDialog } from '../panels/ConflictDialog';
import { ImportDropZone } from '../panels/ImportDialog';
import { VersionsPanel } from '../panels/VersionsPanel';
import { WorkflowPanel } from '../panels/WorkflowPanel';
import { navigate } from '../route';
import { RunPanel } from '../run/RunPanel';
import { currentDoc, useEditor } from '../store/editor';
import { saveNow, startBackgroundWork } from '../store/persistence';
import { Canvas } from './Canvas';
import { Palette } from './Palette';
import { Toolbar } from './Toolbar';

function typing(target: EventTarget | null): boolean {
  const el = target as HTMLElement | null;
  return !!el && (el.tagName === 'INPUT' || el.tagName === 'TEXTAREA' || el.tagName === 'SELECT' || el.isContentEditable
    || !!el.closest?.('.cm-editor'));
}

/** How long a notice shows (its CSS fade-out ends with it). */
const NOTICE_MS = 3000;

function useShortcuts() {
  const t = useT();
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      const mod = e.ctrlKey || e.metaKey;
      const key = e.key.toLowerCase();
      if (mod && key === 's') {
        e.preventDefault();
        void saveNow();
        return;
      }
      if (typing(e.target)) return;
      const s = useEditor.getState();
      const history = useEditor.temporal.getState();
      if (mod && key === 'z' && !e.shiftKey) { e.preventDefault(); history.undo(); }
      else if (mod && (key === 'y' || (key === 'z' && e.shiftKey))) { e.preventDefault(); history.redo(); }
      else if (mod && key === 'c') { const n = s.copySelection(); if (n) s.setMessage(t('shortcuts.copied', { count: n })); }
      else if (mod && key === 'v') { e.preventDefault(); const n = s.paste(); if (n) s.setMessage(t('shortcuts.pasted', { count: n })); }
      else if (mod && key === 'd') { e.preventDefault(); s.duplicateSelection(); }
      else if (key === 'delete' || key === 'backspace') { e.preventDefault(); s.deleteSelection(); }
    };
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, [t]);
}

function SidePanel() {
  const t = useT();
  const panel = useEditor((s) => s.panel);
  const setPanel = useEditor((s) => s.setPanel);
  return (
    <aside className="side-panel">
      <div className="tabs" role="tablist">
        <button type="button" role="tab" aria-selected={panel === 'config'} data-testid="tab-config"
          onClick={() => setPanel('config')}>{t('config.title')}</button>
        <button type="button" role="tab" aria-selected={panel === 'workflow'} data-testid="tab-workflow"
          onClick={() => setPanel('workflow')}>{t('workflow.settings')}</button>
        <button type="button" role="tab" aria-selected={panel === 'versions'} data-testid="tab-versions"
          onClick={() => setPanel('versions')}>{t('versions.title')}</button>
      </div>
      <div className="side-body">
        {panel === 'config' && <ConfigPanel />}
        {panel === 'workflow' && <WorkflowPanel />}
        {panel === 'versions' && <VersionsPanel />}
      </div>
      <Checklist />
    </aside>
  );
}

function EditorBody({ workflowId }: { workflowId: string }) {
  const runOpen = useEditor((s) => s.runPanelOpen);
  const setRunOpen = useEditor((s) => s.setRunPanelOpen);
  const hasErrors = useEditor((s) => s.validating || s.problems.some((p) => p.severity === 'error'));
  const message = useEditor((s) => s.message);
  const setMessage = useEditor((s) => s.setMessage);
  const addNode = useEditor((s) => s.addNode);
  const replaceDocument = useEditor((s) => s.replaceDocument);
  const { screenToFlowPosition } = useReactFlow();
  useShortcuts();

  useEffect(() => {
    if (!message) return undefined;
    const timer = setTimeout(() => setMessage(null), NOTICE_MS);
    return () => clearTimeout(timer);
  }, [message, setMessage]);

  const addAtCentre = useCallback((kind: string) => {
    const box = document.querySelector('[data-testid="canvas"]')?.getBoundingClientRect();
    const point = box ? screenToFlowPosition({ x: box.left + box.width / 2, y: box.top + box.height / 2 }) : { x: 0, y: 0 };
    addNode(kind, point);
  }, [addNode, screenToFlowPosition]);

  const getDocument = useCallback((): WorkflowDoc => currentDoc(), []);

  return (
    <div className="editor">
      <Toolbar />
      <div className="editor-main">
        <div className="left-panel"><Palette onPick={addAtCentre} /></div>
        <ImportDropZone className="canvas-wrap" onOpen={navigate} onReplace={replaceDocument}>
          <Canvas />
          {message && <div key={message} className="toast" role="status" data-testid="toast">{message}</div>}
        </ImportDropZone>
        <SidePanel />
      </div>
      {runOpen && (
        <div className="run-slot" data-testid="run-slot">
          <RunPanel workflowId={workflowId} getDocument={getDocument} canRun={!hasErrors} onClose={() => setRunOpen(false)} />
        </div>
      )}
      <ConflictDialog />
    </div>
  );
}

export function Editor({ workflowId }: { workflowId: string }) {
  const t = useT();
  const [error, setError] = useState<string | null>(null);
  const loaded = useEditor((s) => s.workflowId === workflowId);

  useEffect(() => {
    // Leaving with changes not saved yet: a pending save is sent at once; changes that
    // cannot be saved (a conflict, a refused save) make the browser ask first.
    const onLeave = (e: BeforeUnloadEvent) => {
      const status = useEditor.getState().saveStatus;
      if (status === 'dirty') void saveNow();
      if (status === 'conflict' || status === 'error') e.preventDefault();
    };
    window.addEventListener('beforeunload', onLeave);
    return () => window.removeEventListener('beforeunload', onLeave);
  }, []);

  useEffect(() => {
    const stop = startBackgroundWork();
    let cancelled = false;
    api.getWorkflow(workflowId).then((detail) => {
      if (cancelled) return;
      useEditor.getState().load(workflowId, detail.draft as unknown as WorkflowDoc, detail.draft_version,
        detail.published_version ?? null);
    }, (e: Error) => !cancelled && setError(e.message));
    return () => {
      cancelled = true;
      void saveNow().finally(stop);
      useEditor.setState({ workflowId: null });
    };
  }, [workflowId]);

  if (error) return <div className="center error" role="alert">{t('common.error', { message: error })}</div>;
  if (!loaded) return <div className="center muted">{t('common.loading')}</div>;
  return (
    <ReactFlowProvider>
      <EditorBody workflowId={workflowId} />
    </ReactFlowProvider>
  );
}
