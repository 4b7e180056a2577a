/** Asks for an API key when none is stored; the key is checked against the server first. */
import { useState, type FormEvent } from 'react';
import { api, setApiKey } from '../api/client';
import { useT } from '../i18n';

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
      <p className="muted">{t('key.prompt')}</p>
      <input id="api-key" data-testid="key-input" type="password" autoComplete="off" value={value}
        placeholder={t('key.placeholder')} onChange={(e) => setValue(e.target.value)} />
      <button type="submit" data-testid="key-submit" disabled={busy || !value.trim()}>{t('key.save')}</button>
      {error && <div className="error" role="alert">{error}</div>}
    </form>
  );
}
