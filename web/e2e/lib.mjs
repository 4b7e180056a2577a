/**
 * Shared helpers of the browser tests: the headless Chromium of the machine (never a
 * downloaded browser), a page logged in with the key from the environment, the API
 * called directly (for checks and set-up the scenarios are not about), screenshots into
 * `E2E_SHOTS`, and canvas gestures (drag from the palette, connect two handles).
 *
 * Environment: `BASE_URL` (the running `flowloom serve`), `FLOWLOOM_KEY` (an admin key),
 * `E2E_SHOTS` (folder for screenshots; default a temporary folder).
 */
import { mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

export const BASE_URL = process.env.BASE_URL ?? 'http://127.0.0.1:8400';
export const KEY = process.env.FLOWLOOM_KEY ?? '';
export const SHOTS = process.env.E2E_SHOTS ?? join(tmpdir(), 'flowloom-e2e-shots');
mkdirSync(SHOTS, { recursive: true });

export const CHROMIUM_ARGS = ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--disable-quic'];

/** Headless Chromium from /usr/bin/chromium. */
export function launch() {
  return chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: CHROMIUM_ARGS });
}

/** A new page of a fresh context, logged in (the key through the login URL's fragment), English UI. */
export async function openApp(browser, path = '/') {
  const context = await browser.newContext({ viewport: { width: 1500, height: 950 }, acceptDownloads: true });
  await context.addInitScript(() => localStorage.setItem('flowloom.lang', 'en'));
  const page = await context.newPage();
  page.setDefaultTimeout(15000);
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.errors = errors;
  // console errors and warnings besides the browser's own line for a failed request
  // (an expected 409 or 422 logs "Failed to load resource")
  const logged = [];
  page.on('console', (m) => {
    if ((m.type() === 'error' || m.type() === 'warning') && !/Failed to load resource/.test(m.text())) logged.push(m.text());
  });
  page.consoleProblems = logged;
  await page.goto(`${BASE_URL}${path}#key=${encodeURIComponent(KEY)}`);
  return page;
}

/** Calls the API with the key; throws with the server's answer on a non-2xx. */
export async function apiCall(method, path, body) {
  const res = await fetch(BASE_URL + path, { method, headers: { Authorization: `Bearer ${KEY}`,
    ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
  body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

/** Saves a PNG of the page (or of `locator`) as SHOTS/<name>.png and returns its path. */
export async function shot(page, name, locator = null) {
  const path = join(SHOTS, `${name}.png`);
  await (locator ?? page).screenshot({ path });
  return path;
}

export const byTestId = (page, id) => page.locator(`[data-testid="${id}"]`);

/** Opens workflow `id` in the editor and waits for its canvas. */
export async function openWorkflow(page, id) {
  await page.goto(`${BASE_URL}/#/w/${encodeURIComponent(id)}`);
  await byTestId(page, 'canvas').waitFor();
  await page.locator('.react-flow__node').first().waitFor();
  await byTestId(page, 'fit-button').click();
  await page.waitForTimeout(300);
}

/** Drags the palette item of `kind` onto the canvas at (x, y) relative to the canvas box;
 * returns the id of the node that appeared. */
export async function dragFromPalette(page, kind, x, y) {
  const before = new Set(await page.locator('.react-flow__node').evaluateAll((els) => els.map((e) => e.dataset.id)));
  const canvas = byTestId(page, 'canvas');
  await byTestId(page, `palette-item-${kind}`).dragTo(canvas, { targetPosition: { x, y } });
  const handle = await page.waitForFunction((known) => {
    const ids = [...document.querySelectorAll('.react-flow__node')].map((e) => e.dataset.id);
    return ids.find((id) => !known.includes(id)) ?? null;
  }, [...before]);
  return handle.jsonValue();
}

/** Connects two handles with the mouse (press on one, move, release on the other) and
 * waits for the new edge. A node re-rendered by a validation answer mid-gesture drops
 * the connection being drawn, so the gesture is tried again once, as a person would. */
export async function connect(page, fromTestId, toTestId) {
  const edges = page.locator('.react-flow__edge');
  const before = await edges.count();
  for (let attempt = 0; attempt < 3; attempt += 1) {
    const from = await byTestId(page, fromTestId).boundingBox();
    const to = await byTestId(page, toTestId).boundingBox();
    if (!from || !to) throw new Error(`handle not visible: ${!from ? fromTestId : toTestId}`);
    await page.mouse.move(from.x + from.width / 2, from.y + from.height / 2);
    await page.mouse.down();
    await page.mouse.move(to.x + to.width / 2, to.y + to.height / 2, { steps: 10 });
    await page.mouse.up();
    try {
      await page.waitForFunction((n) => document.querySelectorAll('.react-flow__edge').length > n, before,
        { timeout: 1500 });
      return;
    } catch {
      await page.waitForTimeout(500);
    }
  }
  const path = await shot(page, `connect-failed-${fromTestId}`);
  const box = await byTestId(page, fromTestId).boundingBox();
  console.log('TOAST', await page.locator('[data-testid="toast"]').allInnerTexts());
  const tbox = await byTestId(page, toTestId).boundingBox();
  console.log('TTOP', await page.evaluate(([x, y]) => { const e = document.elementFromPoint(x, y); return e?.outerHTML.slice(0, 200); }, [tbox.x + tbox.width / 2, tbox.y + tbox.height / 2]));
  console.log('TOP', await page.evaluate(([x, y]) => { const e = document.elementFromPoint(x, y); return e?.outerHTML.slice(0, 300); }, [box.x + box.width / 2, box.y + box.height / 2]));
  throw new Error(`could not connect ${fromTestId} to ${toTestId} (screenshot: ${path})`);
}

/** Waits until the draft is saved (the toolbar's save status says so). */
export async function waitSaved(page) {
  await page.waitForFunction(() => {
    const el = document.querySelector('[data-testid="save-status"]');
    return el && el.classList.contains('saved');
  }, null, { timeout: 15000 });
}

/** Waits until the saved draft of `id` satisfies `check(draft)` (autosave is debounced). */
export async function waitDraft(id, check, timeoutMs = 15000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const draft = await draftOf(id);
    if (check(draft)) return draft;
    if (Date.now() > deadline) throw new Error(`the draft of ${id} never matched: ${JSON.stringify(draft).slice(0, 500)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** The current draft of workflow `id` from the API. */
export async function draftOf(id) {
  return (await apiCall('GET', `/v1/workflows/${encodeURIComponent(id)}`)).draft;
}
