import { describe, expect, it } from 'vitest';
import { en } from './en';
import { zhCN } from './zh-CN';
import { flowLabels, formatTime, translate } from './index';

describe('dictionaries', () => {
  it('test_keys_same_in_every_language', () => {
    expect(Object.keys(zhCN).sort()).toEqual(Object.keys(en).sort());
  });

  it('test_no_empty_text_in_any_language', () => {
    for (const dict of [en, zhCN]) {
      for (const [key, text] of Object.entries(dict)) expect(text.trim(), key).not.toBe('');
    }
  });

  it('test_placeholders_match_between_languages', () => {
    const names = (text: string) => [...text.matchAll(/\{(\w+)\}/g)].map((m) => m[1]).sort();
    for (const key of Object.keys(en) as (keyof typeof en)[]) expect(names(zhCN[key]), key).toEqual(names(en[key]));
  });

  it('test_translate_chooses_the_word_for_a_count', () => {
    expect(translate('en', 'knowledge.counts', { documents: 1, chunks: 4 })).toBe('1 document, 4 chunks');
    expect(translate('en', 'knowledge.counts', { documents: 0, chunks: 1 })).toBe('0 documents, 1 chunk');
    expect(translate('zh-CN', 'knowledge.counts', { documents: 1, chunks: 4 })).toBe('1 个文档，4 个分段');
  });

  it('test_translate_fills_placeholders', () => {
    expect(translate('en', 'toolbar.saved', { version: 3 })).toBe('Saved (draft v3)');
    expect(translate('zh-CN', 'toolbar.saved', { version: 3 })).toBe('已保存（草稿 v3）');
  });
});

describe('every UI string goes through the dictionaries', () => {
  it('test_every_t_key_used_in_the_source_exists', async () => {
    const { readdirSync, readFileSync, statSync } = await import('node:fs');
    const { join } = await import('node:path');
    const files: string[] = [];
    const walk = (dir: string) => {
      for (const name of readdirSync(dir)) {
        const path = join(dir, name);
        if (statSync(path).isDirectory()) walk(path);
        else if (/\.tsx?$/.test(name) && !name.endsWith('.test.ts')) files.push(path);
      }
    };
    walk(join(__dirname, '..'));
    const used = new Set<string>();
    for (const f of files) {
      for (const m of readFileSync(f, 'utf8').matchAll(/\bt\('([a-zA-Z0-9_.]+)'/g)) used.add(m[1]);
    }
    expect(used.size).toBeGreaterThan(20);
    for (const key of used) expect(Object.keys(en), key).toContain(key);
  });
});

describe('no UI text outside the dictionaries', () => {
  it('test_editor_components_have_no_literal_jsx_text', async () => {
    const { readdirSync, readFileSync } = await import('node:fs');
    const { join } = await import('node:path');
    const src = join(__dirname, '..');
    const files = [join(src, 'App.tsx'), ...['canvas', 'panels'].flatMap((dir) => readdirSync(join(src, dir))
      .filter((f) => f.endsWith('.tsx')).map((f) => join(src, dir, f)))];
    for (const file of files) {
      const code = readFileSync(file, 'utf8').replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');
      // Text between tags made of words (three letters or more), e.g. <b>Save</b>.
      const literal = code.match(/>\s*[A-Za-z][A-Za-z ,.'!?-]{2,}\s*</g) ?? [];
      const attrs = code.match(/(?:title|placeholder|aria-label)="[^"]*[A-Za-z]{3,}[^"]*"/g) ?? [];
      expect([...literal, ...attrs], file).toEqual([]);
    }
  });
});

describe('flowLabels', () => {
  it('test_zoom_buttons_are_titled_in_the_language', () => {
    expect(flowLabels('zh-CN')['controls.zoomIn.ariaLabel']).toBe('放大');
    expect(flowLabels('en')['controls.fitView.ariaLabel']).toBe('Fit the view');
  });
});

describe('formatTime', () => {
  it('test_dates_follow_the_ui_language', () => {
    const at = Date.UTC(2026, 0, 2, 15, 4, 5) / 1000;
    expect(formatTime(at, 'en')).toBe(new Date(at * 1000).toLocaleString('en'));
    expect(formatTime(at, 'zh-CN')).toBe(new Date(at * 1000).toLocaleString('zh-CN'));
    expect(formatTime(at, 'zh-CN')).toMatch(/^2026\/1\/[23]/);
    expect(formatTime(at, 'en', true)).toBe(new Date(at * 1000).toLocaleTimeString('en'));
  });
});
