/**
 * A node kind's title and description in the builder's language: the server's catalog
 * carries them per language (`labels`), English being the kind's own title and
 * description. No kind is named here; a language the catalog lacks falls back to English.
 */
import type { NodeKind } from '../api/types';

export interface KindText {
  title: string;
  description: string;
}

/** The title and description of `kind` in `lang` (English when the catalog has none). */
export function kindText(kind: Pick<NodeKind, 'title' | 'description' | 'labels'>, lang: string): KindText {
  const label = kind.labels?.[lang];
  return label ? { title: label.title, description: label.description }
    : { title: kind.title, description: kind.description };
}
