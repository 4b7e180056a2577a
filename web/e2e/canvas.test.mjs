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
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import {
  apiCall, byTestId, connect, draftOf, dragFromPalette, waitDraft, launch, openApp, openWorkflow, shot, SHOTS, waitSaved,
} from './lib.mjs';

const TRIAGE = process.env.E2E_TRIAGE_ID ?? 'e2e_triage';
const DIFY_FILE = process.env.E2E_DIFY_FILE ?? '';
let browser;

before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

/** A test with a fresh logged-in page; on failure a screenshot `FAILED-<name>.png` is
 * saved; the page's uncaught errors and its console errors or warnings (other than the
 * browser's line for an expected failed request) fail the scenario too. */
function scenario(name, fn) {
  test(name, async () => {
    const page = await openApp(browser);
    try {
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

/** Model tokens spent by all runs so far (a reused node run spends none). */
async function tokensSpent() {
  const runs = (await apiCall('GET', '/v1/runs?limit=500')).runs;
  return runs.reduce((sum, r) => sum + (r.tokens_in ?? 0), 0);
}

async function nodeStatus(page, id) {
  return byTestId(page, `node-status-${id}`).getAttribute('class');
}

scenario('build a classify flow by drag and connect, fix its validation error, run it', async (page) => {
  await byTestId(page, 'new-workflow-id').fill(TRIAGE);
  await byTestId(page, 'new-workflow').click();
  await byTestId(page, 'canvas').waitFor();
  await byTestId(page, 'node-start').waitFor();
  await zoomOut(page, 3);

  const classify = await dragFromPalette(page, 'classify_question', 420, 250);
  await connect(page, 'handle-start-out', `handle-${classify}-in`);
  await selectNode(page, classify);
  await fill(page, 'config-model', 'default');
  await fill(page, 'config-categories.0.id', 'billing');
  await fill(page, 'config-categories.0.name', 'Billing');
  // two categories with one id: the checklist names the problem and Run is blocked
  await fill(page, 'config-categories.1.id', 'billing');
  await fill(page, 'config-categories.1.name', 'Other');
  const problem = page.locator('[data-testid="checklist-item"]', { hasText: 'unique' });
  await problem.first().waitFor();
  assert.match(await problem.first().innerText(), new RegExp(classify));
  assert.ok(await byTestId(page, 'run-button').isDisabled(), 'Run is blocked while the checklist has errors');
  await shot(page, 'triage-validation-error');
  await fill(page, 'config-categories.1.id', 'other');
  await problem.first().waitFor({ state: 'detached' });
  await byTestId(page, `handle-${classify}-billing`).waitFor();
  await byTestId(page, `handle-${classify}-other`).waitFor();

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
  // the classifier reads the message (its question defaults to sys.query): a chat flow,
  // so the panel opens on the chat preview; this run is a one-off from the Run tab
  await byTestId(page, 'chat-input').waitFor();
  await byTestId(page, 'run-tab-run').click();
  await fill(page, 'run-message', 'I want a refund for my last bill');
  await byTestId(page, 'run-start').click();
  await waitRunStatus(page, 'succeeded');
  assert.match(await byTestId(page, 'run-answer').innerText(), /Billing team here: a refund is on its way\./);
  assert.match(await nodeStatus(page, classify), /run-succeeded/);
  assert.match(await nodeStatus(page, billing), /run-succeeded/);
  assert.match(await nodeStatus(page, other), /run-skipped/);
  await byTestId(page, 'fit-button').click();
  await page.waitForTimeout(400);
  await shot(page, 'triage-canvas-after-run', byTestId(page, 'canvas'));
  await shot(page, 'triage-run-panel', byTestId(page, 'run-panel'));
  await byTestId(page, `trace-node-${classify}`).locator('summary').click();
  await byTestId(page, `trace-outputs-${classify}`).waitFor();
  assert.match(await byTestId(page, `trace-outputs-${classify}`).innerText(), /billing/);
  await shot(page, 'triage-trace', byTestId(page, 'trace'));
});

scenario('re-run from a node of a past run with the edited draft', async (page) => {
  await openWorkflow(page, TRIAGE);
  await selectNode(page, 'answer');
  await fill(page, 'config-text', 'Billing team (v2): refund approved.');
  await waitDraft(TRIAGE, (d) => d.nodes.some((n) => n.config?.text?.includes('(v2)')));
  await openRunPanel(page);
  await byTestId(page, 'run-tab-history').click();
  const past = page.locator('[data-testid^="history-run-"]').first();
  await past.click();
  // the past run's statuses are replayed on the canvas and its trace is shown
  await waitRunStatus(page, 'replay');
  await byTestId(page, 'trace').waitFor();
  assert.match(await nodeStatus(page, 'answer_2'), /run-skipped/);
  assert.match(await nodeStatus(page, 'classify_question'), /run-succeeded/);
  const calls = await tokensSpent();
  await byTestId(page, 'trace-node-answer').locator('summary').click();
  await byTestId(page, 'rerun-answer').click();
  await waitRunStatus(page, 'succeeded');
  assert.match(await byTestId(page, 'run-answer').innerText(), /Billing team \(v2\): refund approved\./);
  await byTestId(page, 'trace-node-classify_question').waitFor();
  assert.match(await byTestId(page, 'trace-node-classify_question').innerText(), /reused/);
  assert.equal(await tokensSpent(), calls, 'the classifier was reused, not asked again');
  await shot(page, 'rerun-trace', byTestId(page, 'run-panel'));
  const runs = (await apiCall('GET', `/v1/runs?workflow_id=${TRIAGE}`)).runs;
  assert.ok(runs.length >= 2);
});

scenario('publish the triage flow (pytest then calls it through /v1/chat/completions)', async (page) => {
  await openWorkflow(page, TRIAGE);
  await page.waitForFunction(() => !document.querySelector('[data-testid="publish-button"]')?.hasAttribute('disabled'));
  await byTestId(page, 'publish-button').click();
  await byTestId(page, 'publish-note').fill('first release from the browser');
  await byTestId(page, 'publish-submit').click();
  await page.waitForFunction(() => !document.querySelector('[data-testid="publish-note"]'));
  const saved = await apiCall('GET', `/v1/workflows/${TRIAGE}`);
  assert.equal(saved.published_version, 1);

  // the draft edited after publishing (version 1 keeps running): comparing names the
  // changed field with its published and its new value
  await selectNode(page, 'answer');
  await fill(page, 'config-text', 'Billing team (v3): refund approved.');
  await waitDraft(TRIAGE, (d) => d.nodes.some((n) => n.config?.text?.includes('(v3)')));
  await byTestId(page, 'tab-versions').click();
  await byTestId(page, 'version-diff-1').click();
  const field = page.locator('[data-testid="diff-node-answer"] [data-testid="diff-field"][data-path="config.text"]');
  await field.waitFor();
  assert.equal(await field.locator('[data-testid="diff-before"]').innerText(), 'Billing team (v2): refund approved.');
  assert.equal(await field.locator('[data-testid="diff-after"]').innerText(), 'Billing team (v3): refund approved.');
  await shot(page, 'version-diff', byTestId(page, 'diff-dialog'));
  // the other side can be a version too: version 1 against itself differs in nothing
  await byTestId(page, 'diff-to').selectOption('1');
  await byTestId(page, 'diff-empty').waitFor();
});

scenario('stop a slow run', async (page) => {
  await apiCall('POST', '/v1/workflows', {
    id: 'e2e_slow', name: 'Slow model', version: 1, inputs: [], variables: [],
    nodes: [
      { id: 'start', type: 'start', position: { x: 0, y: 0 } },
      { id: 'llm', type: 'chat', position: { x: 300, y: 0 }, config: { model: 'default', user_prompt: '{{ sys.query }}' } },
      { id: 'say', type: 'answer', position: { x: 600, y: 0 }, config: { text: '{{ llm.answer }}' } },
    ],
    edges: [{ id: 'e1', source: 'start', target: 'llm' }, { id: 'e2', source: 'llm', target: 'say' }],
  });
  await openWorkflow(page, 'e2e_slow');
  await openRunPanel(page);
  await byTestId(page, 'run-tab-run').click();
  await fill(page, 'run-message', 'answer slowly please');
  await byTestId(page, 'run-start').click();
  await page.waitForFunction(() => /word1 /.test(document.querySelector('[data-testid="run-answer"]')?.textContent ?? ''));
  assert.match(await nodeStatus(page, 'llm'), /run-running/);
  await shot(page, 'slow-running', byTestId(page, 'run-panel'));
  const asked = Date.now();
  await byTestId(page, 'run-stop').click();
  await waitRunStatus(page, 'cancelled', 5000);
  assert.ok(Date.now() - asked < 5000);
  assert.match(await nodeStatus(page, 'llm'), /run-cancelled/);
  const answer = await byTestId(page, 'run-answer').innerText();
  assert.ok(!/word59/.test(answer), 'the stream stopped before the model finished');
  await byTestId(page, 'fit-button').click();
  await page.waitForTimeout(300);
  await shot(page, 'slow-stopped', byTestId(page, 'canvas'));
});

scenario('answer a question in the chat preview', async (page) => {
  await openWorkflow(page, 'order_confirm');
  await openRunPanel(page);
  await byTestId(page, 'run-tab-chat').click();
  await fill(page, 'run-input-item', 'tea');
  await byTestId(page, 'chat-input').fill('I would like to order tea');
  await byTestId(page, 'chat-send').click();
  const confirm = byTestId(page, 'interrupt-confirm');
  await confirm.waitFor();
  assert.match(await confirm.innerText(), /Order 1 x tea\?/);
  assert.match(await nodeStatus(page, 'confirm'), /run-waiting/);
  await shot(page, 'chat-question', byTestId(page, 'run-panel'));
  await byTestId(page, 'interrupt-option-change').click();
  await byTestId(page, 'interrupt-details').waitFor();
  await byTestId(page, 'interrupt-field-quantity').fill('3');
  await byTestId(page, 'interrupt-submit').click();
  await page.locator('[data-testid="chat-message-assistant"]', { hasText: 'Order placed: 3 x tea.' }).waitFor();
  assert.match(await nodeStatus(page, 'placed'), /run-succeeded/);
  assert.match(await nodeStatus(page, 'cancelled'), /run-skipped/);
  const chatId = (await byTestId(page, 'chat-id').innerText()).replace(/^Chat /, '');
  // each answer is a turn of the conversation: what was chosen, then what came back
  const stored = (await apiCall('GET', `/v1/chats/${chatId}/messages`)).messages;
  assert.deepEqual(stored.map((m) => `${m.role}:${m.status}`), ['user:done', 'assistant:paused', 'user:done',
    'assistant:paused', 'user:done', 'assistant:done']);
  assert.equal(stored[2].text, 'Change quantity');
  assert.match(stored[5].text, /Order placed: 3 x tea\./);
  await shot(page, 'chat-answered', byTestId(page, 'run-panel'));
  // the same chat goes on: a second turn is sent with the same chat id
  await byTestId(page, 'chat-input').fill('one more please');
  await byTestId(page, 'chat-send').click();
  await byTestId(page, 'interrupt-confirm').waitFor();
  await byTestId(page, 'interrupt-option-cancel').click();
  await page.locator('[data-testid="chat-message-assistant"]', { hasText: 'Order cancelled.' }).waitFor();
  const after = (await apiCall('GET', `/v1/chats/${chatId}/messages`)).messages;
  assert.equal(after.length, 10);
  assert.match(after[9].text, /Order cancelled\./);
  // however long the conversation, the log scrolls and the message box stays in the panel
  const slot = await byTestId(page, 'run-slot').boundingBox();
  const send = await byTestId(page, 'chat-send').boundingBox();
  assert.ok(send.y + send.height <= slot.y + slot.height + 1, 'the Send button stays inside the run panel');
});

scenario('refused runs and a failed chat turn say why', async (page) => {
  // a chat flow with a required input whose HTTP call cannot succeed (a loopback target)
  await apiCall('POST', '/v1/workflows', {
    id: 'e2e_failing_chat', name: 'Failing chat', version: 1, variables: [],
    inputs: [{ name: 'city', type: 'string', required: true }],
    nodes: [
      { id: 'start', type: 'start', position: { x: 0, y: 0 } },
      { id: 'fetch', type: 'http_request', position: { x: 300, y: 0 }, config: { url: 'http://127.0.0.1:9/{{ inputs.city }}' } },
      { id: 'say', type: 'answer', position: { x: 600, y: 0 }, config: { text: '{{ sys.query }} {{ fetch.body }}' } },
    ],
    edges: [{ id: 'e1', source: 'start', target: 'fetch' }, { id: 'e2', source: 'fetch', target: 'say' }],
  });
  await openWorkflow(page, 'e2e_failing_chat');
  await openRunPanel(page);
  // the run tab with the required input empty: the 422's problem is shown
  await byTestId(page, 'run-tab-run').click();
  await byTestId(page, 'run-start').click();
  await page.waitForFunction(() => /'city' is required/.test(document.querySelector('[data-testid="run-error"]')?.textContent ?? ''));
  assert.match(await byTestId(page, 'run-error').innerText(), /the inputs do not fit the workflow: 'city' is required/);
  // the chat preview: the start's own error, no follow-up read, the message kept to send again
  await byTestId(page, 'run-tab-chat').click();
  await byTestId(page, 'chat-input').fill('weather please');
  await byTestId(page, 'chat-send').click();
  await page.waitForFunction(() => /'city' is required/.test(document.querySelector('[data-testid="run-error"]')?.textContent ?? ''));
  await page.waitForTimeout(300);
  assert.doesNotMatch(await byTestId(page, 'run-error').innerText(), /no chat/);
  assert.equal(await byTestId(page, 'chat-input').inputValue(), 'weather please');
  assert.equal(await page.locator('[data-testid="chat-message-user"]').count(), 0);
  // a turn that fails: its bubble gives the run's error
  await fill(page, 'run-input-city', 'rome');
  await byTestId(page, 'chat-send').click();
  const failure = byTestId(page, 'chat-error');
  await failure.waitFor();
  assert.match(await failure.innerText(), /This turn failed: .*127\.0\.0\.1/);
  await shot(page, 'chat-failed-turn', byTestId(page, 'run-panel'));
});

scenario('an agent asks in the chat preview and its rounds show in the trace', async (page) => {
  await apiCall('POST', '/v1/workflows', {
    id: 'e2e_agent', name: 'Asking agent', version: 1, inputs: [], variables: [],
    nodes: [
      { id: 'start', type: 'start', position: { x: 0, y: 0 } },
      { id: 'agent', type: 'agent', position: { x: 300, y: 0 }, config: { model: 'default', user_prompt: '{{ sys.query }}' } },
      { id: 'say', type: 'answer', position: { x: 600, y: 0 }, config: { text: '{{ agent.answer }}' } },
    ],
    edges: [{ id: 'e1', source: 'start', target: 'agent' }, { id: 'e2', source: 'agent', target: 'say' }],
  });
  await openWorkflow(page, 'e2e_agent');
  await openRunPanel(page);
  await byTestId(page, 'chat-input').fill('How is the weather?');
  await byTestId(page, 'chat-send').click();
  const ask = byTestId(page, 'interrupt-agent');
  await ask.waitFor();
  assert.equal(await ask.getAttribute('data-kind'), 'ask');
  assert.match(await ask.innerText(), /Which city should I look at\?/);
  assert.match(await nodeStatus(page, 'agent'), /run-waiting/);
  await ask.getByRole('button', { name: 'Rome' }).click();
  await page.locator('[data-testid="chat-message-assistant"]', { hasText: 'The weather in Rome is sunny.' }).waitFor();
  assert.match(await nodeStatus(page, 'agent'), /run-succeeded/);
  await byTestId(page, 'trace-node-agent').locator('summary').click();
  const rounds = page.locator('[data-testid^="trace-round-agent-"]');
  await rounds.first().waitFor();
  assert.ok(await rounds.count() >= 2, 'one round asked, the next answered');
  assert.match(await rounds.first().innerText(), /ask_agent/);
  await shot(page, 'agent-trace', byTestId(page, 'run-panel'));
});

scenario('undo and redo', async (page) => {
  await byTestId(page, 'new-workflow-id').fill('e2e_undo');
  await byTestId(page, 'new-workflow').click();
  await byTestId(page, 'node-start').waitFor();
  const nodes = page.locator('.react-flow__node');
  assert.equal(await nodes.count(), 1);
  const added = await dragFromPalette(page, 'answer', 500, 300);
  assert.equal(await nodes.count(), 2);
  await byTestId(page, 'undo-button').click();
  await byTestId(page, `node-${added}`).waitFor({ state: 'detached' });
  assert.equal(await nodes.count(), 1);
  await byTestId(page, 'redo-button').click();
  await byTestId(page, `node-${added}`).waitFor();
  // and from the keyboard
  await byTestId(page, 'canvas').click({ position: { x: 30, y: 30 } });
  await page.keyboard.press('Control+z');
  await byTestId(page, `node-${added}`).waitFor({ state: 'detached' });
  await page.keyboard.press('Control+y');
  await byTestId(page, `node-${added}`).waitFor();
  await waitDraft('e2e_undo', (d) => d.nodes.length === 2);
  // an answer with no text is an error, so it says something before the flow runs
  await selectNode(page, added);
  await fill(page, 'config-text', 'Hello');
  await waitDraft('e2e_undo', (d) => d.nodes.some((n) => n.config?.text === 'Hello'));
  // start -> answer reads no message: once validated, the run panel asks for none and
  // opens on the Run tab
  await openRunPanel(page);
  await byTestId(page, 'run-message').waitFor({ state: 'detached' });
  assert.equal(await byTestId(page, 'run-tab-run').getAttribute('aria-selected'), 'true');
});

scenario('the config panel follows the UI language', async (page) => {
  await byTestId(page, 'new-workflow-id').fill('e2e_lang');
  await byTestId(page, 'new-workflow').click();
  await byTestId(page, 'node-start').waitFor();
  const chat = await dragFromPalette(page, 'chat', 500, 300);
  await selectNode(page, chat);
  const label = (path) => byTestId(page, `config-field-${path}`).locator('.field-label').first();
  assert.match(await label('system_prompt').textContent(), /^System prompt/i);
  await byTestId(page, 'language-select').selectOption('zh-CN');
  // the catalog's titles: the kind's config fields and the policy fields every node has
  await page.waitForFunction(() => document.querySelector('[data-testid="config-field-system_prompt"] .field-label')
    ?.textContent?.startsWith('系统提示词'));
  await byTestId(page, 'config-policy').locator('summary').click();
  assert.match(await label('max_retries').textContent(), /^最大重试次数/);
  // enum values too: the options show the labels, the stored value stays the raw one
  const strategies = await byTestId(page, 'config-error_strategy').locator('option').allTextContents();
  assert.ok(strategies.includes('走异常分支'), strategies.join(', '));
  await shot(page, 'config-zh-CN', byTestId(page, 'config-panel'));
  // a refused connection (here a node dropped on itself) says why, in the UI language
  const out = await byTestId(page, `handle-${chat}-out`).boundingBox();
  const body = await byTestId(page, `node-${chat}`).boundingBox();
  await page.mouse.move(out.x + out.width / 2, out.y + out.height / 2);
  await page.mouse.down();
  await page.mouse.move(body.x + body.width / 2, body.y + body.height / 2, { steps: 10 });
  await page.mouse.up();
  await page.locator('[data-testid="toast"]', { hasText: '节点不能连接到自身' }).waitFor();
  // the config panel of another node opens at its top, wherever the last one was scrolled
  await page.locator('.side-body').evaluate((el) => { el.scrollTop = el.scrollHeight; });
  assert.ok(await page.locator('.side-body').evaluate((el) => el.scrollTop) > 0);
  await byTestId(page, 'node-title-start').click();
  await page.locator('[data-testid="config-panel"][data-node="start"]').waitFor();
  assert.equal(await page.locator('.side-body').evaluate((el) => el.scrollTop), 0);
  await selectNode(page, chat);
  await byTestId(page, 'language-select').selectOption('en');
  assert.match(await label('system_prompt').textContent(), /^System prompt/i);
});

/** Drops a file on the drop zone `testId`, as a person dragging it from the desktop. */
async function dropFile(page, testId, name, content) {
  const transfer = await page.evaluateHandle(([n, c]) => {
    const dt = new DataTransfer();
    dt.items.add(new File([c], n, { type: n.endsWith('.json') ? 'application/json' : 'application/x-yaml' }));
    return dt;
  }, [name, content]);
  const zone = byTestId(page, testId).first();
  await zone.dispatchEvent('dragover', { dataTransfer: transfer });
  await zone.dispatchEvent('drop', { dataTransfer: transfer });
}

scenario('export a workflow and import the file again', async (page) => {
  await openWorkflow(page, TRIAGE);
  const [download] = await Promise.all([page.waitForEvent('download'), byTestId(page, 'export-button').click()]);
  const file = join(SHOTS, `${TRIAGE}.export.json`);
  await download.saveAs(file);
  const exported = JSON.parse(readFileSync(file, 'utf8'));
  assert.equal(exported.id, TRIAGE);
  assert.deepEqual(exported.nodes.map((n) => n.id).sort(), ['answer', 'answer_2', 'classify_question', 'start']);
  await byTestId(page, 'back-button').click();
  await byTestId(page, 'workflow-list').waitFor();
  await dropFile(page, 'import-drop-zone', `${TRIAGE}.json`, readFileSync(file, 'utf8'));
  await byTestId(page, 'import-report').waitFor();
  await shot(page, 'reimport-report');
  await byTestId(page, 'import-open').click();
  await page.waitForFunction((id) => location.hash.startsWith('#/w/') && location.hash !== `#/w/${id}`, TRIAGE);
  const copyId = decodeURIComponent(await page.evaluate(() => location.hash.slice(4)));
  await byTestId(page, 'node-classify_question').waitFor();
  const copy = await draftOf(copyId);
  assert.deepEqual(copy.nodes.map((n) => n.id).sort(), exported.nodes.map((n) => n.id).sort());
  assert.equal(copy.edges.length, exported.edges.length);
});

scenario('import a Dify file and chat with it', async (page) => {
  assert.ok(DIFY_FILE, 'E2E_DIFY_FILE must name a Dify export (the pytest driver passes one from shared/corpus)');
  await byTestId(page, 'workflow-list').waitFor();
  await dropFile(page, 'import-drop-zone', 'basic_chatflow.yml', readFileSync(DIFY_FILE, 'utf8'));
  await byTestId(page, 'import-report').waitFor();
  // no model is named in the file: the report says so and offers a partial import
  assert.match(await byTestId(page, 'import-report').innerText(), /model/);
  await byTestId(page, 'import-allow-partial').click();
  await byTestId(page, 'import-open').click();
  await byTestId(page, 'node-llm').waitFor();
  await shot(page, 'dify-imported');
  await openRunPanel(page);
  await byTestId(page, 'chat-input').waitFor();  // a chat flow opens on the chat preview
  await byTestId(page, 'chat-input').fill('think about hello from Dify');
  await byTestId(page, 'chat-send').click();
  const reply = page.locator('[data-testid="chat-message-assistant"]', { hasText: 'Scripted answer to: think about hello from Dify' });
  await reply.waitFor();
  assert.match(await nodeStatus(page, 'llm'), /run-succeeded/);
  // the model's reasoning is kept, collapsed under the answer
  const reasoning = reply.locator('[data-testid="chat-reasoning"]');
  assert.equal(await reasoning.getAttribute('open'), null);
  assert.ok(!(await reasoning.locator('div').isVisible()), 'reasoning starts collapsed');
  await reasoning.locator('summary').click();
  assert.match(await reasoning.innerText(), /First I weigh the question\./);
  // the next turn keeps the chat id: the stored conversation has both turns
  const chatId = (await byTestId(page, 'chat-id').innerText()).replace(/^Chat /, '');
  await byTestId(page, 'chat-input').fill('and again');
  await byTestId(page, 'chat-send').click();
  await page.locator('[data-testid="chat-message-assistant"]', { hasText: 'Scripted answer to: and again' }).waitFor();
  assert.equal((await byTestId(page, 'chat-id').innerText()).replace(/^Chat /, ''), chatId);
  assert.equal((await apiCall('GET', `/v1/chats/${chatId}/messages`)).messages.length, 4);
});
