/**
 * The scenario helper every browser-test file shares: one headless Chromium per file
 * (importing this module registers its start and stop), a fresh logged-in page per
 * scenario; a scenario fails on an uncaught page error or a console error or warning
 * (other than the browser's own line for an expected failed request), and leaves
 * `FAILED-<name>.png` when it fails.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { launch, openApp, shot } from './lib.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

/** A test with a fresh logged-in page (`lang`: the UI language it starts in). */
export function scenario(name, fn, { lang = 'en' } = {}) {
  test(name, async () => {
    const page = await openApp(browser);
    try {
      if (lang !== 'en') {
        await page.evaluate((l) => localStorage.setItem('flowloom.lang', l), lang);
        await page.context().addInitScript((l) => localStorage.setItem('flowloom.lang', l), lang);
        await page.reload();
      }
      await fn(page);
      assert.deepEqual(page.errors, [], 'uncaught errors in the page');
      assert.deepEqual(page.consoleProblems, [], 'console errors or warnings');
    } catch (e) {
      await shot(page, `FAILED-${name.replace(/[^a-z0-9]+/gi, '-')}`).catch(() => undefined);
      throw e;
    } finally {
      await page.context().close();
    }
  });
}
