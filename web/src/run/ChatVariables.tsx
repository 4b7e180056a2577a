/**
 * The chat preview's conversation variables: what the next turn starts from - the values
 * the chat holds (`GET /v1/chats/{id}/variables`, read again after each turn), else the
 * workflow's defaults - each editable in place (`PUT`), as in Dify's chat debugger.
 */
import { useCallback, useEffect, useState } from 'react';
import { request } from '../api/client';
import type { ChatVariablesBody } from '../api/types';
import { useT } from '../i18n';
import { parseTyped, showTyped } from '../lib/convVars';
import type { Json, VarDecl } from '../lib/workflow';
import { useEditor } from '../store/editor';
import { useRunPanel } from './store';

const path = (chatId: string) => `/v1/chats/${encodeURIComponent(chatId)}/variables`;

function VariableRow({ decl, value, chatId, onSaved }: { decl: VarDecl; value: Json | undefined; chatId: string | null;
  onSaved: (values: Record<string, Json>) => void }) {
  const t = useT();
  const [text, setText] = useState(showTyped(value));
  const [error, setError] = useState<string | null>(null);
  useEffect(() => setText(showTyped(value)), [value]);
  const parsed = parseTyped(decl.type, text);
  const changed = text !== showTyped(value);
  const save = async () => {
    if (!chatId || !parsed.ok) return;
    try {
      const answer = await request<ChatVariablesBody>('PUT', path(chatId), { body: { variables: { [decl.name]: parsed.value } } });
      setError(null);
      onSaved(answer.variables as Record<string, Json>);
    } catch (err) {
      setError(err instanceof Error ? err.message : String(err));
    }
  };
  return (
    <div className="row chat-var" data-testid={`chat-var-${decl.name}`}>
      <code>conversation.{decl.name}</code>
      <input aria-label={decl.name} data-testid={`chat-var-input-${decl.name}`} value={text} disabled={!chatId}
        title={chatId ? '' : t('convVars.afterFirstTurn')} className={parsed.ok ? '' : 'invalid'}
        onChange={(e) => setText(e.target.value)}
        onKeyDown={(e) => { if (e.key === 'Enter') { e.preventDefault(); void save(); } }} />
      {chatId && changed && (
        <button type="button" className="small" data-testid={`chat-var-save-${decl.name}`} disabled={!parsed.ok}
          onClick={() => void save()}>{t('convVars.save')}</button>
      )}
      {!parsed.ok && <span className="error small">{t('convVars.notType', { type: parsed.error })}</span>}
      {error && <span className="error small">{error}</span>}
    </div>
  );
}

export function ChatVariables() {
  const t = useT();
  const declared = useEditor((s) => s.meta.conversation_variables) ?? [];
  const chatId = useRunPanel((s) => s.chatId);
  const busy = useRunPanel((s) => s.busy);
  const turns = useRunPanel((s) => s.messages.length);
  const [held, setHeld] = useState<Record<string, Json>>({});
  const load = useCallback(async (id: string) => {
    try {
      const answer = await request<ChatVariablesBody>('GET', path(id));
      if (useRunPanel.getState().chatId === id) setHeld(answer.variables as Record<string, Json>);
    } catch {
      setHeld({}); // the chat has no stored turn yet: the defaults stand
    }
  }, []);
  useEffect(() => {
    if (!chatId) setHeld({});
    else if (!busy) void load(chatId);
  }, [chatId, busy, turns, load]);
  if (!declared.length) return null;
  return (
    <details className="chat-vars" data-testid="chat-variables" open>
      <summary>{t('vars.conversation')}</summary>
      {declared.map((decl) => (
        <VariableRow key={decl.name} decl={decl} chatId={chatId && turns > 0 ? chatId : null}
          value={decl.name in held ? held[decl.name] : decl.default} onSaved={setHeld} />
      ))}
    </details>
  );
}
