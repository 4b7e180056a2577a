/**
 * The glyph of a catalog icon name (the catalog names icons; it does not ship them).
 * Unknown names show their first letter, so a new kind never breaks the palette.
 */
import { memo } from 'react';

const GLYPHS: Record<string, string> = {
  play: '▶', message: '✉', flag: '⚑', sparkles: '✦', split: '⋔', list: '☰', search: '⌕', wrench: '⚒',
  bot: '☺', 'git-branch': '⎇', repeat: '⟳', rotate: '↻', square: '■', braces: '{}', code: '</>', pencil: '✎',
  merge: '⇉', globe: '◍', pointer: '☝', form: '▤', alert: '⚠',
};

export const KindIcon = memo(function KindIcon({ icon, title }: { icon: string; title?: string }) {
  return (
    <span className="kind-icon" aria-hidden={title ? undefined : true} title={title}>
      {GLYPHS[icon] ?? (icon ? icon[0].toUpperCase() : '•')}
    </span>
  );
});
