/** A modal dialog (closed with Escape or its close button). */
import { useEffect, type ReactNode } from 'react';
import { useT } from '../i18n';

export function Dialog({ title, onClose, children, testId, footer }: { title: string; onClose: () => void;
  children: ReactNode; testId?: string; footer?: ReactNode }) {
  const t = useT();
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (e.key === 'Escape') onClose();
    };
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, [onClose]);
  return (
    <div className="dialog-backdrop" onMouseDown={(e) => { if (e.target === e.currentTarget) onClose(); }}>
      <div className="dialog" role="dialog" aria-modal="true" aria-label={title} data-testid={testId}>
        <div className="dialog-head">
          <h2>{title}</h2>
          <button type="button" className="icon" aria-label={t('common.close')} onClick={onClose}>×</button>
        </div>
        <div className="dialog-body">{children}</div>
        {footer && <div className="dialog-foot">{footer}</div>}
      </div>
    </div>
  );
}
