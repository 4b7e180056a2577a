/**
 * Background work on the open workflow: validation and autosave, both debounced on
 * every change of the canvas.
 *
 * - Validation: POST /v1/workflows/validate with the document: its problems feed the
 *   node badges and the checklist, its node shapes the handles, outputs and the
 *   variable picker, its `system_reads` the run panel (message field, chat tab). A newer
 *   change aborts the older request, so an old answer never overwrites a newer one.
 * - Autosave: PUT the draft with the draft version it was loaded or last saved as. A
 *   409 means another tab saved a newer draft: the editor shows the conflict dialog and
 *   saves nothing until the person chooses; nothing is ever overwritten silently.
 */
import { api, ApiError } from '../api/client';
import type { Problem } from '../api/types';
import { nodeReads } from '../lib/refs';
import { problemIndex, shapesOf } from '../lib/shape';
import { problemWords } from './problemWords';
import { isFlowNode } from '../lib/serialize';
import { currentDoc, useEditor, type EditorState } from './editor';

const VALIDATE_MS = 400;
const SAVE_MS = 1200;

let validateTimer: ReturnType<typeof setTimeout> | undefined;
let saveTimer: ReturnType<typeof setTimeout> | undefined;
let validateAbort: AbortController | null = null;
let saving: Promise<void> | null = null;

/** Validates the current document now (and refreshes the node shapes). */
export async function validateNow(): Promise<void> {
  validateAbort?.abort();
  const abort = new AbortController();
  validateAbort = abort;
  const doc = currentDoc();
  useEditor.setState({ validating: true });
  try {
    const answer = await api.validate(doc, abort.signal);
    if (abort.signal.aborted) return;
    useEditor.getState().applyShapes(shapesOf(answer));
    const problems = answer.problems as unknown as Problem[];
    useEditor.setState({ problems, problemIndex: problemIndex(problems, problemWords), validating: false,
      validateError: null, systemReads: answer.system_reads ?? [], flagged: stillFlagged(useEditor.getState()) });
  } catch (e) {
    if ((e as Error).name === 'AbortError') return;
    useEditor.setState({ validating: false, validateError: (e as Error).message });
  }
}

/** Flags that still hold: the node exists and still reads the deleted node. */
function stillFlagged(state: EditorState): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  const ids = new Set(state.nodes.map((n) => n.id));
  for (const n of state.nodes) {
    if (!isFlowNode(n)) continue;
    const reads = (state.flagged[n.id] ?? []).filter((id) => !ids.has(id) && nodeReads(n.data.node, id));
    if (reads.length) out[n.id] = reads;
  }
  return out;
}

/** Saves the draft now when it differs from the saved one. Resolves when done. */
export async function saveNow(opts: { force?: boolean } = {}): Promise<void> {
  if (saving) await saving;
  const state = useEditor.getState();
  if (!state.workflowId || state.saveStatus === 'conflict' && !opts.force) return;
  const doc = currentDoc();
  const json = JSON.stringify(doc);
  if (json === state.savedJson && state.draftVersion !== null && !opts.force) {
    if (state.saveStatus === 'dirty') useEditor.setState({ saveStatus: 'saved' });
    return;
  }
  const run = async () => {
    useEditor.setState({ saveStatus: 'saving', saveError: null });
    try {
      const version = opts.force ? useEditor.getState().conflictVersion ?? state.draftVersion : state.draftVersion;
      const detail = version === null ? await api.createWorkflow(doc) : await api.saveDraft(doc.id, doc, version);
      const latest = JSON.stringify(currentDoc());
      useEditor.setState({ draftVersion: detail.draft_version, publishedVersion: detail.published_version ?? null,
        savedJson: json, saveStatus: latest === json ? 'saved' : 'dirty', conflictVersion: null });
    } catch (e) {
      if (e instanceof ApiError && e.status === 409 && e.currentVersion !== null) {
        useEditor.setState({ saveStatus: 'conflict', conflictVersion: e.currentVersion, saveError: e.message });
      } else {
        useEditor.setState({ saveStatus: 'error', saveError: (e as Error).message });
      }
    }
  };
  saving = run().finally(() => {
    saving = null;
  });
  await saving;
}

/** Drops local changes and loads the server's draft (after a conflict). */
export async function reloadDraft(): Promise<void> {
  const id = useEditor.getState().workflowId;
  if (!id) return;
  const detail = await api.getWorkflow(id);
  useEditor.getState().load(id, detail.draft as never, detail.draft_version, detail.published_version ?? null);
  void validateNow();
}

let lastJson = '';
let changeTimer: ReturnType<typeof setTimeout> | undefined;

/** Called a moment after the canvas changed: when the document itself changed (not only
 * the selection or a measurement), validate soon and save a little later. */
function documentMaybeChanged(): void {
  const s = useEditor.getState();
  const json = JSON.stringify(currentDoc());
  if (json === lastJson) return;
  lastJson = json;
  clearTimeout(validateTimer);
  validateTimer = setTimeout(() => void validateNow(), VALIDATE_MS);
  if (s.saveStatus === 'conflict') return;
  if (json !== s.savedJson && s.saveStatus !== 'dirty' && s.saveStatus !== 'saving') {
    useEditor.setState({ saveStatus: 'dirty' });
  }
  clearTimeout(saveTimer);
  saveTimer = setTimeout(() => void saveNow(), SAVE_MS);
}

/** Starts watching the editor store; returns the function that stops it. */
export function startBackgroundWork(): () => void {
  const unsubscribe = useEditor.subscribe((s, prev) => {
    if (s.workflowId !== prev.workflowId) {
      lastJson = s.workflowId ? JSON.stringify(currentDoc(s)) : '';
      clearTimeout(validateTimer);
      validateTimer = setTimeout(() => void validateNow(), 0);
      return;
    }
    if (s.nodes === prev.nodes && s.edges === prev.edges && s.meta === prev.meta) return;
    clearTimeout(changeTimer);
    changeTimer = setTimeout(documentMaybeChanged, 150);
  });
  return () => {
    unsubscribe();
    clearTimeout(validateTimer);
    clearTimeout(saveTimer);
    clearTimeout(changeTimer);
  };
}
