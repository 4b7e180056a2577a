/**
 * The chat preview of a chat flow: the conversation (kept under one `chat_id` across
 * turns and reloaded from `GET /v1/chats/{id}/messages` after each), the assistant's
 * live answer while it streams, reasoning collapsed, the sources an answer cites (opened
 * to their quoted text), and a pending question answered in place, pinned between the
 * log and the message box (its options or form; or simply the next message, which
 * answers it as in FastGPT).
 */
import { useEffect, useRef, useState } from 'react';
import { useT } from '../i18n';
import type { Interrupt } from '../api/types';
import type { PendingInterrupt } from './events';
import { Citations } from '../knowledge/Citations';
import { messageCitations } from '../knowledge/citations';
import { ChatVariables } from './ChatVariables';
import { InterruptCard } from './Interrupt';
import { runErrorText, useRunPanel, type ChatMessage } from './store';

const KINDS: readonly string[] = ['user_select', 'form_input', 'ask', 'confirm'] satisfies Interrupt['kind'][];

/** Whether a stored message part's data is an interrupt (the run state's `Interrupt`). */
function isInterrupt(data: Record<string, unknown> | undefined): data is Interrupt & Record<string, unknown> {
  return !!data && typeof data.id === 'string' && typeof data.node_id === 'string' && typeof data.kind === 'string'
    && KINDS.includes(data.kind) && typeof data.payload === 'object' && data.payload !== null;
}

/** The text a question shows: a select's or form's description, an agent's question. */
export function questionOf(p: PendingInterrupt['payload']): string {
  return 'description' in p ? p.description : p.question;
}

function interruptsOf(message: ChatMessage): PendingInterrupt[] {
  if (message.status !== 'paused') return [];
  return message.parts.map((p) => (p.type === 'interrupt' ? p.data : undefined)).filter(isInterrupt)
    .map((d) => ({ id: d.id, nodeId: d.node_id, kind: d.kind, payload: d.payload }));
}

/** The error a failed turn's stored message carries (a part's `data.error`), or ''. */
export function messageError(message: ChatMessage): string {
  for (const p of message.parts) {
    const text = runErrorText(p.data?.error);
    if (text) return text;
  }
  return '';
}

function Message({ message, last }: { message: ChatMessage; last: boolean }) {
  const t = useT();
  const failed = message.status === 'failed';
  const stored = failed ? messageError(message) : '';
  const known = useRunPanel((s) => (failed && message.run_id ? s.runErrors[message.run_id] ?? '' : ''));
  const loadRunError = useRunPanel((s) => s.loadRunError);
  // neither the message nor the followed run said why: the run's record does
  useEffect(() => {
    if (failed && !stored && !known && message.run_id) void loadRunError(message.run_id);
  }, [failed, stored, known, message.run_id, loadRunError]);
  const reason = stored || known;
  const reasoning = message.parts.filter((p) => p.type === 'reasoning').map((p) => p.text ?? '').join('');
  const tools = message.parts.filter((p) => p.type === 'tool_call');
  const ended = message.status === 'failed' || message.status === 'cancelled';
  // a turn paused on its first question before any text: the question card says it all
  if (last && !message.text && !reasoning && !tools.length && !ended) return null;
  return (
    <div className={`chat-message ${message.role}`} data-testid={`chat-message-${message.role}`} data-status={message.status}>
      {reasoning && (
        <details className="reasoning" data-testid="chat-reasoning">
          <summary>{t('run.reasoning')}</summary><div>{reasoning}</div>
        </details>
      )}
      {tools.map((p, i) => <div key={i} className="tool-call">🔧 {String(p.data?.name ?? p.text ?? '')}</div>)}
      {message.text && <div className="chat-text">{message.text}</div>}
      <Citations items={messageCitations(message.parts)} testId="chat-citations" />
      {!last && interruptsOf(message).map((i) => (
        <div key={i.id} className="muted chat-question">❓ {questionOf(i.payload)}</div>
      ))}
      {failed && <div className="chat-error" data-testid="chat-error">{reason
        ? t('run.chat.failedBecause', { message: reason }) : t('run.chat.failed')}</div>}
      {message.status === 'cancelled' && <div className="muted">{t('run.chat.cancelled')}</div>}
    </div>
  );
}

export function ChatPreview({ inputs }: { inputs: () => Record<string, unknown> | null }) {
  const t = useT();
  const messages = useRunPanel((s) => s.messages);
  const live = useRunPanel((s) => s.live);
  const busy = useRunPanel((s) => s.busy);
  const chatTurn = useRunPanel((s) => s.chatTurn);
  const chatId = useRunPanel((s) => s.chatId);
  const send = useRunPanel((s) => s.sendChat);
  const newChat = useRunPanel((s) => s.newChat);
  const answer = useRunPanel((s) => s.answer);
  const [text, setText] = useState('');
  const log = useRef<HTMLDivElement>(null);
  // Scroll the log itself, not with scrollIntoView, which also scrolls every ancestor
  // (the run slot) and would move the message box out of view.
  useEffect(() => { if (log.current) log.current.scrollTop = log.current.scrollHeight; }, [messages, live.answer]);

  const submit = () => {
    const values = inputs();
    if (!text.trim() || values === null) return;
    const sent = text.trim();
    setText('');
    // a turn the server refused to start: the message comes back to be sent again
    void send(sent, values).then((ok) => { if (!ok) setText((now) => now || sent); });
  };
  const streaming = busy && chatTurn;
  // The pending question, answered in one place below the log, above the message box:
  // kept in view with its buttons however long the conversation or short the panel, and
  // its form keeps what was typed while the messages are reloaded. The followed run's own, else
  // the one the last stored message paused on (a chat opened without following its run).
  const lastStored = messages[messages.length - 1];
  const followed = chatTurn && live.status === 'paused' && live.runId;
  const questions = followed ? live.interrupts
    : !busy && lastStored?.role === 'assistant' ? interruptsOf(lastStored) : [];
  const questionRun = followed ? live.runId : lastStored?.run_id ?? null;

  return (
    <div className={`chat-preview${questions.length ? ' asking' : ''}`} data-testid="chat-preview">
      <div className="chat-head">
        <span className="muted" data-testid="chat-id">{chatId ? t('run.chat.id', { id: chatId }) : t('run.chat.new')}</span>
        <button type="button" className="link" data-testid="chat-new" onClick={newChat}>{t('run.chat.reset')}</button>
      </div>
      <ChatVariables />
      <div className="chat-log" data-testid="chat-log" ref={log}>
        {messages.map((m, i) => <Message key={m.id} message={m} last={i === messages.length - 1} />)}
        {streaming && (
          <div className="chat-message assistant streaming" data-testid="chat-streaming">
            {live.reasoning && <details className="reasoning"><summary>{t('run.reasoning')}</summary><div>{live.reasoning}</div></details>}
            <div className="chat-text">{live.answer || '…'}</div>
            <Citations items={live.citations} testId="chat-live-citations" />
          </div>
        )}
      </div>
      {questions.length > 0 && (
        <div className="chat-questions" data-testid="chat-questions">
          {questions.map((i) => (
            <InterruptCard key={i.id} interrupt={i} disabled={busy} onAnswer={(a, text) => void answer(i.id, a, questionRun, text)} />
          ))}
        </div>
      )}
      <form className="chat-form" onSubmit={(e) => { e.preventDefault(); submit(); }}>
        <textarea data-testid="chat-input" rows={2} value={text} placeholder={t('run.chat.placeholder')}
          onChange={(e) => setText(e.target.value)}
          onKeyDown={(e) => { if (e.key === 'Enter' && !e.shiftKey) { e.preventDefault(); submit(); } }} />
        <button type="submit" className="primary" data-testid="chat-send" disabled={busy || !text.trim()}>{t('run.chat.send')}</button>
      </form>
    </div>
  );
}
