/**
 * The scenario helper and gestures shared by the builder-friction browser tests
 * (wrong-results, friction and readme files): one headless Chromium per file, a fresh
 * logged-in page per scenario; a scenario fails on an uncaught page error or a console
 * error or warning (other than the browser's own line for an expected failed request),
 * and leaves `FAILED-<name>.png` when it fails.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { byTestId, launch, openApp, shot } from './lib.mjs';

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

export async function fill(page, testId, value) {
  const el = byTestId(page, testId);
  await el.fill(value);
  await el.blur();
}

export async function selectNode(page, id) {
  await byTestId(page, `node-title-${id}`).click();
  await page.locator(`[data-testid="config-panel"][data-node="${id}"]`).waitFor();
}

export async function openRunPanel(page) {
  await byTestId(page, 'run-button').click();
  await byTestId(page, 'run-panel').waitFor();
}

export async function waitRunStatus(page, status, timeout = 30000) {
  await page.waitForFunction((want) =>
    document.querySelector('[data-testid="run-status"]')?.getAttribute('data-status') === want, status, { timeout });
}

/** Waits until the run panel's trace is shown with run status `status`. */
export async function waitTrace(page, status = 'succeeded') {
  await page.waitForFunction((want) => {
    const badge = document.querySelector('[data-testid="trace-status"]');
    return badge && badge.className.includes(`run-${want}`);
  }, status, { timeout: 30000 });
}
