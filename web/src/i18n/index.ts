/**
 * UI strings: `t(key, params)` looks the key up in the current language's dictionary
 * (`{name}` placeholders filled from params). The language is kept in localStorage and
 * switched with {@link setLanguage}; components re-render through {@link useT}.
 */
import { useCallback } from 'react';
import { create } from 'zustand';
import { en, type MessageKey } from './en';
import { zhCN } from './zh-CN';
import type { AriaLabelConfig } from '@xyflow/react';

export type { MessageKey };
export const dictionaries = { en, 'zh-CN': zhCN } as const;
export type Language = keyof typeof dictionaries;
export const languages: { id: Language; label: string }[] = [
  { id: 'en', label: 'English' },
  { id: 'zh-CN', label: '简体中文' },
];

const LANG_STORAGE = 'flowloom.lang';

function initialLanguage(): Language {
  try {
    const saved = localStorage.getItem(LANG_STORAGE);
    if (saved && saved in dictionaries) return saved as Language;
    if (typeof navigator !== 'undefined' && navigator.language?.toLowerCase().startsWith('zh')) return 'zh-CN';
  } catch {
    /* no storage (tests): English */
  }
  return 'en';
}

export const useLanguage = create<{ lang: Language }>(() => ({ lang: initialLanguage() }));

/** Switches the UI language (and remembers it). */
export function setLanguage(lang: Language): void {
  try {
    localStorage.setItem(LANG_STORAGE, lang);
  } catch {
    /* ignore */
  }
  document.documentElement.lang = lang;
  useLanguage.setState({ lang });
}

export type Params = Record<string, string | number>;

/** The text of `key` in `lang`, placeholders filled; the English text when missing.
 * `{name|one|other}` is the word for `params.name`'s count: `one` when it is 1, else
 * `other` (`{documents} {documents|document|documents}`), so no count reads "1 documents". */
export function translate(lang: Language, key: MessageKey, params?: Params): string {
  const text: string = dictionaries[lang][key] ?? en[key] ?? key;
  if (!params) return text;
  return text
    .replace(/\{(\w+)\|([^|{}]*)\|([^|{}]*)\}/g, (m, name: string, one: string, other: string) =>
      name in params ? (Number(params[name]) === 1 ? one : other) : m)
    .replace(/\{(\w+)\}/g, (m, name: string) => (name in params ? String(params[name]) : m));
}

/** `t` for the current language, outside React (event handlers, stores). */
export function t(key: MessageKey, params?: Params): string {
  return translate(useLanguage.getState().lang, key, params);
}

/** `t` bound to the current language; components using it re-render on a switch. */
export function useT(): (key: MessageKey, params?: Params) => string {
  const lang = useLanguage((s) => s.lang);
  // one function per language, so hooks may list it as a dependency
  return useCallback((key, params) => translate(lang, key, params), [lang]);
}

/** React Flow's own labels (the zoom buttons' tooltips, the minimap...) in `lang`, for
 * its `ariaLabelConfig`; the library's English texts stay for what is not listed. */
export function flowLabels(lang: Language): Partial<AriaLabelConfig> {
  return {
    'controls.ariaLabel': translate(lang, 'canvas.controls'),
    'controls.zoomIn.ariaLabel': translate(lang, 'canvas.zoomIn'),
    'controls.zoomOut.ariaLabel': translate(lang, 'canvas.zoomOut'),
    'controls.fitView.ariaLabel': translate(lang, 'canvas.fitView'),
    'minimap.ariaLabel': translate(lang, 'canvas.minimap'),
  };
}

/** A time stamp (seconds since the epoch, as the API gives them) as date and time in
 * `lang`'s conventions, not the browser's; `timeOnly` for today's lists. */
export function formatTime(seconds: number, lang: Language, timeOnly = false): string {
  const date = new Date(seconds * 1000);
  return timeOnly ? date.toLocaleTimeString(lang) : date.toLocaleString(lang);
}
