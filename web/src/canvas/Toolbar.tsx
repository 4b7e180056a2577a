/** The editor's toolbar: save state, undo/redo, layout, zoom-to-fit, note, export,
 * publish and run (both disabled while the checklist has errors). */
import { useReactFlow } from '@xyflow/react';
import { useEffect, useRef, useState } from 'react';
import { useStore } from 'zustand';
import { api } from '../api/client';
import { useT } from '../i18n';
import { PublishDialog } from '../panels/PublishDialog';
import { navigate } from '../route';
import { useEditor } from '../store/editor';
import { saveNow } from '../store/persistence';
import { fitCanvas } from './Canvas';

function download(name: string, data: unknown): void {
  const url = URL.createObjectURL(new Blob([JSON.stringify(data, null, 2)], { type: 'application/json' }));
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  a.click();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

export function Toolbar() {
  const t = useT();
  const { fitView, screenToFlowPosition } = useReactFlow();
  const workflowId = useEditor((s) => s.workflowId);
  const name = useEditor((s) => s.meta.name);
  const saveStatus = useEditor((s) => s.saveStatus);
  const saveError = useEditor((s) => s.saveError);
  const draftVersion = useEditor((s) => s.draftVersion);
  const errorCount = useEditor((s) => s.problems.filter((p) => p.severity === 'error').length);
  const validating = useEditor((s) => s.validating);
  const autoLayout = useEditor((s) => s.autoLayout);
  const addNote = useEditor((s) => s.addNote);
  const setRunOpen = useEditor((s) => s.setRunPanelOpen);
  const setMessage = useEditor((s) => s.setMessage);
  const canUndo = useStore(useEditor.temporal, (s) => s.pastStates.length > 0);
  const canRedo = useStore(useEditor.temporal, (s) => s.futureStates.length > 0);
  const [publishing, setPublishing] = useState(false);
  const [moreOpen, setMoreOpen] = useState(false);
  const more = useRef<HTMLDivElement>(null);
  useEffect(() => {
    if (!moreOpen) return undefined;
    const close = (e: MouseEvent) => {
      const target = e.target as HTMLElement;
      if (!more.current?.contains(target) && !target.closest('[data-testid="more-button"]')) setMoreOpen(false);
    };
    document.addEventListener('mousedown', close);
    return () => document.removeEventListener('mousedown', close);
  }, [moreOpen]);
  const blocked = errorCount > 0 || validating;

  const status = saveStatus === 'saving' ? t('toolbar.saving')
    : saveStatus === 'saved' ? t('toolbar.saved', { version: draftVersion ?? 0 })
      : saveStatus === 'error' ? t('toolbar.saveError', { message: saveError ?? '' })
        : saveStatus === 'dirty' || saveStatus === 'conflict' ? t('toolbar.unsaved') : '';

  const exportDoc = async () => {
    if (!workflowId) return;
    try {
      await saveNow();
      download(`${workflowId}.json`, await api.exportWorkflow(workflowId));
    } catch (e) {
      setMessage((e as Error).message);
    }
  };

  return (
    <div className="toolbar" role="toolbar">
      <button type="button" className="link" data-testid="back-button" onClick={() => navigate(null)}>← {t('toolbar.back')}</button>
      <strong className="wf-name" data-testid="workflow-name" title={name || workflowId || undefined}>{name || workflowId}</strong>
      <span className={`save-status ${saveStatus}`} data-testid="save-status">{status}</span>
      <span className="spacer" />
      <button type="button" data-testid="undo-button" disabled={!canUndo} title={t('toolbar.undo')}
        onClick={() => useEditor.temporal.getState().undo()}>↶</button>
      <button type="button" data-testid="redo-button" disabled={!canRedo} title={t('toolbar.redo')}
        onClick={() => useEditor.temporal.getState().redo()}>↷</button>
      <span className="toolbar-more-wrap">
      <button type="button" className="toolbar-more-toggle" data-testid="more-button" aria-haspopup="true"
        aria-expanded={moreOpen} title={t('toolbar.more')} onClick={() => setMoreOpen(!moreOpen)}>⋯</button>
      {/* view and file actions: inline on a wide window, a menu under ⋯ on a narrow one */}
      <div ref={more} className={`toolbar-more${moreOpen ? ' open' : ''}`} onClick={() => setMoreOpen(false)}>
        <button type="button" data-testid="layout-button" onClick={() => { autoLayout(); setTimeout(() => fitCanvas(fitView), 50); }}>
          {t('toolbar.layout')}</button>
        <button type="button" data-testid="fit-button" onClick={() => fitCanvas(fitView)}>{t('toolbar.fit')}</button>
        <button type="button" data-testid="note-button" onClick={() => {
          const box = document.querySelector('[data-testid="canvas"]')?.getBoundingClientRect();
          addNote(box ? screenToFlowPosition({ x: box.left + 40, y: box.top + 40 }) : { x: 0, y: 0 });
        }}>{t('toolbar.note')}</button>
        <button type="button" data-testid="export-button" onClick={() => void exportDoc()}>{t('toolbar.export')}</button>
      </div>
      </span>
      <button type="button" data-testid="save-button" disabled={saveStatus === 'saving' || saveStatus === 'conflict'}
        onClick={() => void saveNow()}>{t('toolbar.save')}</button>
      <button type="button" data-testid="publish-button" className="primary" disabled={blocked}
        title={blocked ? t('toolbar.blocked') : undefined} onClick={() => setPublishing(true)}>{t('toolbar.publish')}</button>
      <button type="button" data-testid="run-button" className="primary" disabled={blocked}
        title={blocked ? t('toolbar.blocked') : undefined} onClick={() => setRunOpen(true)}>{t('toolbar.run')}</button>
      {publishing && <PublishDialog onClose={() => setPublishing(false)} />}
    </div>
  );
}
