/**
 * Browser tests of the canvas against a real `flowloom serve` (BASE_URL, FLOWLOOM_KEY)
 * whose models are the scripted model server of tests/web/canvas_env.py: one headless
 * Chromium for the file, a fresh context per scenario. Run through
 * tests/web/test_canvas_e2e.py, which starts the servers; screenshots go to E2E_SHOTS.
 *
 * Scenarios build on what earlier ones saved only where said (the published triage flow
 * is called afterwards from pytest with the openai SDK).
 */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import {
  apiCall, byTestId, connect, draftOf, dragFromPalette, launch, openApp, openWorkflow, shot, SHOTS, waitSaved,
} from './lib.mjs';

const TRIAGE = process.env.E2E_TRIAGE_ID ?? 'e2e_triage';
const DIFY_FILE = process.env.E2E_DIFY_FILE ?? '';
let browser;

before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

async function fill(page, testId, value) {
  const el = byTestId(page, testId);
  await el.fill(value);
  await el.blur();
}

async function selectNode(page, id) {
  await byTestId(page, `node-title-${id}`).click();
  await byTestId(page, 'config-node-id').waitFor();
  assert.equal(await byTestId(page, 'config-node-id').inputValue(), id);
}

async function openRunPanel(page) {
  await byTestId(page, 'run-button').click();
  await byTestId(page, 'run-panel').waitFor();
}

async function waitRunStatus(page, status, timeout = 30000) {
  await page.waitForFunction((want) =>
    document.querySelector('[data-testid="run-status"]')?.getAttribute('data-status') === want, status, { timeout });
}

/** Zooms the canvas out with its own control, `times` steps. */
async function zoomOut(page, times) {
  for (let i = 0; i < times; i += 1) await page.locator('.react-flow__controls-zoomout').click();
}

async function nodeStatus(page, id) {
  return byTestId(page, `node-status-${id}`).getAttribute('class');
}

test('build a classify flow by drag and connect, fix its validation error, run it', async () => {
  const page = await openApp(browser);
  await byTestId(page, 'new-workflow-id').fill(TRIAGE);
  await byTestId(page, 'new-workflow').click();
  await byTestId(page, 'canvas').waitFor();
  await byTestId(page, 'node-start').waitFor();
  await zoomOut(page, 3);

  const classify = await dragFromPalette(page, 'classify_question', 420, 250);
  await connect(page, 'handle-start-out', `handle-${classify}-in`);
  // a new classifier's two categories share an id: the checklist says so
  await page.locator('[data-testid="checklist-item"]', { hasText: 'unique' }).waitFor();
  assert.ok(await byTestId(page, 'run-button').isDisabled(), 'Run is blocked while the checklist has errors');
  await shot(page, 'triage-validation-error');

  await selectNode(page, classify);
  await fill(page, 'config-model', 'default');
  await fill(page, 'config-categories.0.id', 'billing');
  await fill(page, 'config-categories.0.name', 'Billing');
  await fill(page, 'config-categories.1.id', 'other');
  await fill(page, 'config-categories.1.name', 'Other');
  await byTestId(page, `handle-${classify}-billing`).waitFor();
  await byTestId(page, `handle-${classify}-other`).waitFor();
  await byTestId(page, `handle-${classify}-id_1`).waitFor({ state: 'detached' });
  await page.locator('[data-testid="checklist-item"]', { hasText: 'unique' }).waitFor({ state: 'detached' });

  const billing = await dragFromPalette(page, 'answer', 700, 80);
  await selectNode(page, billing);
  await fill(page, 'config-text', 'Billing team here: a refund is on its way.');
  const other = await dragFromPalette(page, 'answer', 700, 460);
  await selectNode(page, other);
  await fill(page, 'config-text', 'Someone will get back to you.');
  await connect(page, `handle-${classify}-billing`, `handle-${billing}-in`);
  await connect(page, `handle-${classify}-other`, `handle-${other}-in`);

  await page.waitForFunction(() => !document.querySelector('[data-testid="run-button"]')?.hasAttribute('disabled'));
  await waitSaved(page);
  const doc = await draftOf(TRIAGE);
  assert.deepEqual(doc.edges.map((e) => `${e.source}:${e.sourceHandle ?? 'out'}>${e.target}`).sort(),
    [`${classify}:billing>${billing}`, `${classify}:other>${other}`, `start:out>${classify}`].sort());

  await openRunPanel(page);
  await fill(page, 'run-message', 'I want a refund for my last bill');
  await byTestId(page, 'run-start').click();
  await waitRunStatus(page, 'succeeded');
  assert.match(await byTestId(page, 'run-answer').innerText(), /Billing team here: a refund is on its way\./);
  assert.match(await nodeStatus(page, classify), /run-succeeded/);
  assert.match(await nodeStatus(page, billing), /run-succeeded/);
  assert.match(await nodeStatus(page, other), /run-skipped/);
  await shot(page, 'triage-canvas-after-run', byTestId(page, 'canvas'));
  await shot(page, 'triage-run-panel', byTestId(page, 'run-panel'));
  await byTestId(page, `trace-node-${classify}`).locator('summary').click();
  await byTestId(page, `trace-outputs-${classify}`).waitFor();
  assert.match(await byTestId(page, `trace-outputs-${classify}`).innerText(), /billing/);
  await shot(page, 'triage-trace', byTestId(page, 'trace'));
  assert.deepEqual(page.errors, []);
  await page.context().close();
});
