/**
 * Every node kind of the catalog, grouped by category, with a search box. A kind is
 * dragged onto the canvas (or clicked: added at the centre of the view). The same list
 * serves the quick-add menu of an output handle (`onPick`).
 */
import { memo, useMemo, useState, type DragEvent } from 'react';
import type { NodeKind } from '../api/types';
import { translate, useLanguage, useT, type Language, type MessageKey } from '../i18n';
import { kindText } from '../lib/kindLabel';
import { kindMatches } from '../lib/kindSearch';
import { useCatalog } from '../store/catalog';
import { KindIcon } from './icons';

export const KIND_MIME = 'application/x-flowloom-kind';

/** Kinds matching `query` (see lib/kindSearch.ts), grouped by category in catalog order;
 * `categoryLabel` names a category in the UI language (it is searched too). */
export function groupKinds(kinds: readonly NodeKind[], query: string, lang = 'en',
  categoryLabel: (cat: string) => string = () => ''): [string, NodeKind[]][] {
  const groups = new Map<string, NodeKind[]>();
  for (const k of kinds) {
    const cat = k.category || 'other';
    if (!kindMatches(k, query, lang, categoryLabel(cat))) continue;
    const list = groups.get(cat);
    if (list) list.push(k);
    else groups.set(cat, [k]);
  }
  return [...groups];
}

/** A category's name in `lang` (its id when the UI strings have none). */
function categoryLabel(lang: Language, cat: string): string {
  const key = `palette.category.${cat}` as MessageKey;
  const text = translate(lang, key);
  return text === key ? cat : text;
}

function firstLine(text: string): string {
  return text.split(/\n\s*\n/)[0].replace(/\s+/g, ' ').replace(/``/g, '');
}

export const Palette = memo(function Palette({ onPick, compact, autoFocus, exclude }: {
  onPick: (kind: string) => void; compact?: boolean; autoFocus?: boolean; exclude?: (k: NodeKind) => boolean }) {
  const t = useT();
  const lang = useLanguage((s) => s.lang);
  const kinds = useCatalog((s) => s.kinds);
  const [query, setQuery] = useState('');
  const label = (cat: string) => categoryLabel(lang, cat);
  const groups = useMemo(() => groupKinds(exclude ? kinds.filter((k) => !exclude(k)) : kinds, query, lang,
    // the category's name is found in English too (a builder may think of "human input")
    (cat) => `${categoryLabel('en', cat)}\n${categoryLabel(lang, cat)}`), [kinds, query, exclude, lang]);
  const onDragStart = (e: DragEvent, kind: string) => {
    e.dataTransfer.setData(KIND_MIME, kind);
    e.dataTransfer.effectAllowed = 'move';
  };
  return (
    <div className={`palette${compact ? ' compact' : ''}`} data-testid={compact ? 'quick-add' : 'palette'}>
      {!compact && <h3>{t('palette.title')}</h3>}
      <input className="palette-search" data-testid="palette-search" type="search" value={query} autoFocus={autoFocus}
        placeholder={t('palette.search')} onChange={(e) => setQuery(e.target.value)} />
      {groups.length === 0 && <p className="muted">{t('palette.empty')}</p>}
      {groups.map(([cat, list]) => (
        <section key={cat} className="palette-group">
          <h4>{label(cat)}</h4>
          {list.map((k) => {
            const text = kindText(k, lang);
            return (
              <button type="button" key={k.kind} className="palette-item" data-testid={`palette-item-${k.kind}`}
                draggable={!compact} onDragStart={(e) => onDragStart(e, k.kind)} onClick={() => onPick(k.kind)}
                title={text.description}>
                <KindIcon icon={k.icon} />
                <span className="palette-text">
                  <span className="palette-title">{text.title}</span>
                  {!compact && <span className="palette-desc">{firstLine(text.description)}</span>}
                </span>
              </button>
            );
          })}
        </section>
      ))}
    </div>
  );
});
