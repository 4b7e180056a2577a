/**
 * The run panel, in the editor's bottom slot: run the draft with the declared inputs
 * and follow it live (node badges on the canvas, the streamed answer, questions answered
 * in place, Stop), the chat preview of chat flows, the run history with trace replay
 * (selecting a past run shows its statuses on the canvas and its trace), and re-run
 * from a node of a past run with the current draft.
 *
 * What the editor gives it: `workflowId`, `getDocument()` (the current draft document),
 * `canRun` (false while the checklist has errors) and `onClose`. The draft is saved
 * before every run, since the server runs the saved draft.
 *
 * The Run tab's message field (sys.query) shows only for workflows the server says read
 * `sys.query`, and chat flows open on the Chat tab (`runMode`, from the editor's last
 * validate answer); until that answer arrives the field shows.
 */
import { useCallback, useEffect, useState } from 'react';
import { useT } from '../i18n';
import type { WorkflowDoc } from '../lib/workflow';
import { useEditor } from '../store/editor';
import { saveNow } from '../store/persistence';
import { useRunStatus } from '../store/runStatus';
import { InputsForm, inputValues, useDeclaredInputs, type InputDraft } from './Inputs';
import { InterruptCard } from './Interrupt';
import { RunOutputs } from './Outputs';
import { ChatPreview } from './Chat';
import { History } from './History';
import { titledError, useNodeTitles } from './titles';
import { runMode } from './runMode';
import { showStatuses, useRunPanel, statusLabel } from './store';
import { Trace } from './Trace';
import './run.css';

export interface RunPanelProps {
  workflowId: string;
  getDocument: () => WorkflowDoc;
  canRun: boolean;
  onClose: () => void;
}

type Tab = 'run' | 'chat' | 'history';

export function RunPanel(props: RunPanelProps) {
  const t = useT();
  const { workflowId, getDocument } = props;
  const savedJson = useEditor((s) => s.savedJson);
  const inputs = useDeclaredInputs(getDocument, savedJson);
  const [draft, setDraft] = useState<InputDraft>({});
  const [formError, setFormError] = useState<string | null>(null);
  const [message, setMessage] = useState('');
  // what the canvas's document reads, as the last validate answer says (null: none yet),
  // and its declared inputs (the canvas's, so both describe the same document)
  const systemReads = useEditor((st) => st.systemReads);
  const declared = useEditor((st) => st.meta.inputs);
  const mode = runMode(systemReads, (declared ?? []).map((i) => (i as { name?: string }).name ?? ''));
  // The tab shown: the person's choice, else the default - set once the first validate
  // answer is in, so later edits of the document do not move the panel under them.
  const [picked, setTab] = useState<Tab | null>(null);
  const tab: Tab = picked ?? (mode.chatFlow ? 'chat' : 'run');
  useEffect(() => {
    if (picked === null && systemReads !== null) setTab(mode.chatFlow ? 'chat' : 'run');
  }, [picked, systemReads, mode.chatFlow]);
  const s = useRunPanel();
  const titles = useNodeTitles();

  useEffect(() => {
    const panel = useRunPanel.getState();
    if (panel.workflowId !== workflowId) panel.reset(workflowId);
    else if (!panel.replayId) showStatuses(panel.live.nodes);  // reopened: the last run's badges again
    else void panel.replay(panel.replayId);
  }, [workflowId]);
  // the badges belong to the open panel: closing it (or leaving the editor) clears them
  useEffect(() => () => useRunStatus.getState().clear(), []);

  const values = useCallback((): Record<string, unknown> | null => {
    try {
      setFormError(null);
      return inputValues(inputs, draft);
    } catch (e) {
      setFormError((e as Error).message);
      return null;
    }
  }, [inputs, draft]);

  const run = async () => {
    const v = values();
    if (v === null) return;
    await saveNow();
    // a message typed while the field showed is not sent once the workflow no longer reads it
    await s.start(v, mode.showMessage ? message.trim() || undefined : undefined);
  };
  const running = s.busy && (s.live.status === 'running' || s.live.status === 'starting');
  const trace = s.trace;

  return (
    <div className="run-panel" data-testid="run-panel">
      <div className="run-bar">
        <div className="tabs" role="tablist">
          {(['run', 'chat', 'history'] as Tab[]).map((id) => (
            <button key={id} type="button" role="tab" aria-selected={tab === id} data-testid={`run-tab-${id}`}
              onClick={() => setTab(id)}>{t(`run.tab.${id}`)}</button>
          ))}
        </div>
        <span className={`badge run-${s.replayId ? 'replay' : s.live.status}`} data-testid="run-status"
          data-status={s.replayId ? 'replay' : s.live.runId ? s.live.status : 'idle'}>
          {s.replayId ? t('run.replaying') : s.live.runId || s.busy ? statusLabel(s.live.status) : t('run.idle')}</span>
        <span className="spacer" />
        {tab === 'run' && (
          <button type="button" className="primary" data-testid="run-start" disabled={!props.canRun || s.busy}
            title={props.canRun ? undefined : t('toolbar.blocked')} onClick={() => void run()}>{t('run.start')}</button>
        )}
        <button type="button" data-testid="run-stop" disabled={!running || !s.live.runId} onClick={() => void s.stop()}>
          {t('run.stop')}</button>
        <button type="button" className="link" data-testid="run-close" onClick={props.onClose}>{t('common.close')}</button>
      </div>
      {(s.error || formError) && <div className="banner error" role="alert" data-testid="run-error">{formError ?? s.error}</div>}
      <div className="run-body">
        <div className={tab === 'chat' ? 'run-main chat-mode' : 'run-main'}>
          {tab === 'history' ? <History /> : (
            <>
              <InputsForm inputs={inputs} draft={draft} onChange={setDraft} skip={tab === 'chat' ? ['query'] : []} />
              {tab === 'chat' ? <ChatPreview inputs={values} /> : (
                <>
                  {mode.showMessage && (
                    <label className="field run-message" title={t('run.messageHint')}>
                      <span>{t('run.message')} <span className="muted">sys.query</span></span>
                      <input data-testid="run-message" value={message} onChange={(e) => setMessage(e.target.value)} />
                    </label>
                  )}
                  {s.live.reasoning && (
                    <details className="reasoning" data-testid="run-reasoning"><summary>{t('run.reasoning')}</summary>
                      <div>{s.live.reasoning}</div></details>
                  )}
                  <div className="run-answer" data-testid="run-answer">{s.live.answer}</div>
                  <RunOutputs outputs={s.replayId ? trace?.outputs : s.live.outputs} />
                  {s.live.citations.length > 0 && (
                    <div className="run-sources muted" data-testid="run-sources">{t('run.sources')}:{' '}
                      {s.live.citations.map((c) => (
                        <span key={`${c.citation_id}-${c.chunk_id ?? ''}`} title={c.text}>[{c.citation_id}] {c.source_name} </span>
                      ))}
                    </div>
                  )}
                  {s.live.error && <div className="banner error" data-testid="run-failure">{titledError(titles, s.live.error)}</div>}
                  {s.live.warnings.map((w) => <div key={w} className="banner warning">{w}</div>)}
                  {s.live.status === 'paused' && !s.chatTurn && s.live.interrupts.map((i) => (
                    <InterruptCard key={i.id} interrupt={i} disabled={s.busy} onAnswer={(a) => void s.answer(i.id, a)} />
                  ))}
                </>
              )}
            </>
          )}
        </div>
        <div className="run-side">
          {trace ? <Trace run={trace} busy={s.busy} onRerun={(nodeId) => { setTab('run'); void saveNow().then(() => s.rerun(trace.run_id, nodeId)); }} />
            : <div className="muted">{s.busy ? t('run.following') : t('run.trace.none')}</div>}
        </div>
      </div>
    </div>
  );
}
