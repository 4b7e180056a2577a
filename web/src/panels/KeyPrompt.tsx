/** Asks for an API key when none is stored; the key is checked against the server first. */
import { useState, type FormEvent } from 'react';
import { api, setApiKey } from '../api/client';
import { useT } from '../i18n';

/** Text with `commands` in backticks shown as code. */
function withCode(text: string) {
  return text.split('`').map((part, i) => (i % 2 ? <code key={i}>{part}</code> : part));
}

export function KeyPrompt({ onKey, refusedMessage }: { onKey: (key: string) => void; refusedMessage?: string | null }) {
  const t = useT();
  const [value, setValue] = useState('');
  const [error, setError] = useState<string | null>(refusedMessage ? t('key.invalid', { message: refusedMessage }) : null);
  const [busy, setBusy] = useState(false);

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const key = value.trim();
    if (!key) return;
    setBusy(true);
    setApiKey(key);
    try {
      await api.nodeKinds();
      onKey(key);
    } catch (err) {
      setApiKey(null);
      setError(t('key.invalid', { message: (err as Error).message }));
    } finally {
      setBusy(false);
    }
  };

  return (
    <form className="key-prompt" onSubmit={submit} data-testid="key-prompt">
      <h1>{t('app.title')}</h1>
      <label htmlFor="api-key">{t('key.title')}</label>
      <p className="muted" data-testid="key-help">{withCode(t('key.prompt'))}</p>
      <p className="muted small">{withCode(t('key.create'))}</p>
      <input id="api-key" data-testid="key-input" type="password" autoComplete="off" value={value}
        placeholder={t('key.placeholder')} onChange={(e) => setValue(e.target.value)} />
      <button type="submit" data-testid="key-submit" disabled={busy || !value.trim()}>{t('key.save')}</button>
      {error && <div className="error" role="alert">{error}</div>}
    </form>
  );
}
