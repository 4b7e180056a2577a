/**
 * Browser tests of the builder's everyday friction, driven with mouse and keyboard:
 * import through the file dialog with the unknown model and dataset mapped to local
 * ones, rename and delete (confirmed) in the workflow list; a node added from another
 * lands beside it and on no other node; a tool call node lists its tools on its card;
 * "Insert variable" inserts at the caret; Restore of an old version asks first and says
 * it goes live; the chat preview keeps a question in view with its option buttons.
 *
 * Run through tests/web/test_friction_e2e.py (E2E_KNOWLEDGE_FILE: a Dify export whose
 * LLM and knowledge retrieval name a model and a dataset unknown here).
 */
import assert from 'node:assert/strict';
import { apiCall, BASE_URL, byTestId, draftOf, openWorkflow, shot, waitDraft } from './lib.mjs';
import { fill, openRunPanel, scenario, selectNode } from './friction-lib.mjs';

const KNOWLEDGE_FILE = process.env.E2E_KNOWLEDGE_FILE ?? '';
const SOURCE_MODEL = 'deepseek-v3-241226';
const SOURCE_DATASET = '2516f4a8-9329-4845-a914-7965090ee2e2';

async function statusOf(id) {
  const res = await fetch(`${BASE_URL}/v1/workflows/${id}`, { headers: { Authorization: `Bearer ${process.env.FLOWLOOM_KEY}` } });
  return res.status;
}

scenario('import with the file chooser mapping the model and dataset, then rename and delete', async (page) => {
  assert.ok(KNOWLEDGE_FILE, 'E2E_KNOWLEDGE_FILE must name a Dify export with a knowledge retrieval');
  await apiCall('POST', '/v1/datasets', { name: 'Product manual', id: 'manual' });
  await byTestId(page, 'workflow-list').waitFor();
  const [chooser] = await Promise.all([page.waitForEvent('filechooser'), byTestId(page, 'import-choose').click()]);
  await chooser.setFiles(KNOWLEDGE_FILE);
  const mapping = byTestId(page, 'import-mapping');
  await mapping.waitFor();
  await byTestId(page, `import-model-${SOURCE_MODEL}`).selectOption('gpt-4o-mini');
  await byTestId(page, `import-dataset-${SOURCE_DATASET}`).selectOption('manual');
  await shot(page, 'import-mapping', byTestId(page, 'import-report'));
  await byTestId(page, 'import-with-models').click();
  await byTestId(page, 'import-open').waitFor();
  assert.match(await byTestId(page, 'import-report').innerText(), new RegExp(`${SOURCE_MODEL} → gpt-4o-mini`));
  assert.equal(await byTestId(page, 'import-mapping').count(), 0, 'nothing is left to map');
  await byTestId(page, 'import-open').click();
  await page.waitForFunction(() => location.hash.startsWith('#/w/'));
  const id = decodeURIComponent(await page.evaluate(() => location.hash.slice(4)));
  const draft = await draftOf(id);
  assert.deepEqual(draft.nodes.filter((n) => n.type === 'chat').map((n) => n.config.model), ['gpt-4o-mini']);
  assert.deepEqual(draft.nodes.filter((n) => n.type === 'knowledge_retrieval').map((n) => n.config.datasets), [['manual']]);

  await byTestId(page, 'back-button').click();
  await byTestId(page, `workflow-rename-${id}`).click();
  await byTestId(page, `workflow-name-${id}`).fill('Manual bot');
  await page.keyboard.press('Enter');
  await page.locator(`[data-testid="workflow-${id}"]`, { hasText: 'Manual bot' }).waitFor();
  assert.equal((await apiCall('GET', `/v1/workflows/${id}`)).draft.name, 'Manual bot');
  // the row's actions are readable (the knowledge pages' styles are loaded by now: the
  // mapping's dataset picker uses them)
  for (const action of [`workflow-rename-${id}`, `workflow-delete-${id}`]) {
    const ratio = await contrastOf(byTestId(page, action));
    assert.ok(ratio >= 4.5, `${action}: text contrast ${ratio.toFixed(2)} against its background (at least 4.5)`);
  }
  // delete asks first; cancelling keeps it
  await byTestId(page, `workflow-delete-${id}`).click();
  const dialog = byTestId(page, 'workflow-delete-dialog');
  await dialog.waitFor();
  assert.match(await dialog.innerText(), /Manual bot/);
  await shot(page, 'workflow-delete-confirm');
  await byTestId(page, 'workflow-delete-cancel').click();
  assert.equal(await statusOf(id), 200);
  await byTestId(page, `workflow-delete-${id}`).click();
  await byTestId(page, 'workflow-delete-confirm').click();
  await byTestId(page, `workflow-row-${id}`).waitFor({ state: 'detached' });
  assert.equal(await statusOf(id), 404);
});

/** WCAG contrast ratio of an element's text colour against the first opaque background
 * behind it (its own, else its ancestors', else white). */
async function contrastOf(locator) {
  return locator.evaluate((el) => {
    const rgb = (value) => (value.match(/[\d.]+/g) ?? []).map(Number);
    const luminance = ([r, g, b]) => {
      const [R, G, B] = [r, g, b].map((c) => {
        const s = c / 255;
        return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
      });
      return 0.2126 * R + 0.7152 * G + 0.0722 * B;
    };
    let background = [255, 255, 255];
    for (let node = el; node; node = node.parentElement) {
      const parts = rgb(getComputedStyle(node).backgroundColor);
      if (parts.length >= 3 && (parts.length === 3 || parts[3] > 0)) { background = parts.slice(0, 3); break; }
    }
    const [a, b] = [luminance(rgb(getComputedStyle(el).color)), luminance(background)];
    return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
  });
}

function overlap(a, b) {
  return a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;
}

scenario('a new node goes beside its source on no other node; tools on the card; insert at the caret', async (page) => {
  await apiCall('POST', '/v1/workflows', {
    id: 'e2e_place', name: 'Placement', version: 1, inputs: [], variables: [],
    nodes: [
      { id: 'start', type: 'start', position: { x: 0, y: 0 } },
      { id: 'say', type: 'answer', position: { x: 300, y: 0 }, config: { text: 'Hello world' } },
      // where a node added from `say` used to go
      { id: 'there', type: 'answer', position: { x: 580, y: 0 }, config: { text: 'Already here' } },
      { id: 'agent', type: 'tool_call', position: { x: 300, y: 300 }, config: { model: 'default',
        user_prompt: '{{ sys.query }}', builtin_tools: [{ name: 'current_time' }], workflow_tools: [{ workflow: 'hello' }] } },
    ],
    edges: [{ id: 'e1', source: 'start', target: 'say' }, { id: 'e2', source: 'say', target: 'there' },
      { id: 'e3', source: 'start', target: 'agent' }],
  });
  await openWorkflow(page, 'e2e_place');
  // the tool call node says what it can call
  const tools = byTestId(page, 'node-tools-agent');
  await tools.waitFor();
  assert.match(await tools.innerText(), /current_time/);
  assert.match(await tools.innerText(), /hello/);

  const before = new Set(await page.locator('.react-flow__node').evaluateAll((els) => els.map((e) => e.dataset.id)));
  await byTestId(page, 'handle-say-out').click();
  await page.locator('[data-testid="quick-add"] [data-testid="palette-item-answer"]').click();
  const added = await (await page.waitForFunction((known) => [...document.querySelectorAll('.react-flow__node')]
    .map((e) => e.dataset.id).find((id) => !known.includes(id)) ?? null, [...before])).jsonValue();
  await page.waitForTimeout(300);
  const boxes = {};
  for (const id of [...before, added]) boxes[id] = await byTestId(page, `node-${id}`).boundingBox();
  for (const id of before) assert.ok(!overlap(boxes[added], boxes[id]), `the new node ${added} lies on ${id}`);
  assert.ok(boxes[added].x > boxes.say.x + boxes.say.width, 'the new node is to the right of its source');
  await shot(page, 'quick-add-placed', byTestId(page, 'canvas'));

  // Insert variable at the caret: between "Hello " and "world"
  await selectNode(page, 'say');
  const text = byTestId(page, 'config-text');
  await text.click();
  await page.keyboard.press('Control+Home');
  for (let i = 0; i < 'Hello '.length; i += 1) await page.keyboard.press('ArrowRight');
  await byTestId(page, 'config-text-insert').click();
  await byTestId(page, 'var-sys.query').click();
  await page.waitForFunction(() => document.querySelector('[data-testid="config-text"]')?.value === 'Hello {{ sys.query }}world');
  // the caret is back after the variable (the field takes the focus back on the next
  // frame, after the text changed): typing goes on there
  await page.waitForFunction(() => {
    const field = document.querySelector('[data-testid="config-text"]');
    return document.activeElement === field && field.selectionStart === 'Hello {{ sys.query }}'.length;
  });
  await page.keyboard.type(', ');
  await waitDraft('e2e_place', (d) => d.nodes.some((n) => n.config?.text === 'Hello {{ sys.query }}, world'));
});

scenario('restoring an old version asks first and says it goes live', async (page) => {
  const doc = (text) => ({ id: 'e2e_versions', name: 'Versions', version: 1, inputs: [], variables: [],
    nodes: [{ id: 'start', type: 'start', position: { x: 0, y: 0 } },
      { id: 'say', type: 'answer', position: { x: 300, y: 0 }, config: { text } }],
    edges: [{ id: 'e1', source: 'start', target: 'say' }] });
  await apiCall('POST', '/v1/workflows', doc('first'));
  await apiCall('POST', '/v1/workflows/e2e_versions/publish', { note: 'one' });
  const current = await apiCall('GET', '/v1/workflows/e2e_versions');
  await apiCall('PUT', '/v1/workflows/e2e_versions', { workflow: doc('second'), draft_version: current.draft_version });
  await apiCall('POST', '/v1/workflows/e2e_versions/publish', { note: 'two' });
  await openWorkflow(page, 'e2e_versions');
  await byTestId(page, 'tab-versions').click();
  await byTestId(page, 'version-restore-1').click();
  const dialog = byTestId(page, 'restore-dialog');
  await dialog.waitFor();
  assert.match(await byTestId(page, 'restore-warning').innerText(), /goes live at once/);
  assert.match(await byTestId(page, 'restore-warning').innerText(), /v2/);
  await shot(page, 'restore-confirm', dialog);
  await byTestId(page, 'restore-cancel').click();
  await dialog.waitFor({ state: 'detached' });
  assert.equal((await apiCall('GET', '/v1/workflows/e2e_versions')).published_version, 2, 'cancel changes nothing');
  await byTestId(page, 'version-restore-1').click();
  await byTestId(page, 'restore-confirm').click();
  await byTestId(page, 'version-3').waitFor();
  assert.equal((await apiCall('GET', '/v1/workflows/e2e_versions')).published_version, 3);
  const run = await apiCall('POST', '/v1/workflows/e2e_versions/runs', { inputs: {} });
  assert.equal(run.answer, 'first');
});

scenario('the chat preview keeps the question in view with its option buttons', async (page) => {
  await page.setViewportSize({ width: 1280, height: 720 });
  await openWorkflow(page, 'order_confirm');
  await openRunPanel(page);
  await byTestId(page, 'run-tab-chat').click();
  await fill(page, 'run-input-item', 'tea');
  for (const message of ['I would like to order tea', 'and some cake']) {
    await byTestId(page, 'chat-input').fill(message);
    await byTestId(page, 'chat-send').click();
    await byTestId(page, 'interrupt-confirm').waitFor();
    await page.waitForTimeout(300);
    // the question, its buttons and the message box all in view in the run panel
    const slot = await byTestId(page, 'run-slot').boundingBox();
    const question = await byTestId(page, 'interrupt-question').boundingBox();
    const option = await byTestId(page, 'interrupt-option-cancel').boundingBox();
    const send = await byTestId(page, 'chat-send').boundingBox();
    for (const [what, box] of [['question', question], ['option', option], ['Send button', send]]) {
      assert.ok(box.y >= slot.y - 1 && box.y + box.height <= slot.y + slot.height + 1,
        `the ${what} is inside the run panel (${JSON.stringify(box)} in ${JSON.stringify(slot)})`);
    }
    const visible = await page.evaluate(() => {
      const q = document.querySelector('[data-testid="interrupt-question"]').getBoundingClientRect();
      const top = document.elementFromPoint(q.x + 4, q.y + q.height / 2);
      return top?.closest('[data-testid="interrupt-question"]') !== null;
    });
    assert.ok(visible, 'nothing covers the question');
    if (message === 'and some cake') break;
    await byTestId(page, 'interrupt-option-cancel').click();
    await page.locator('[data-testid="chat-message-assistant"]', { hasText: 'Order cancelled.' }).waitFor();
  }
  await shot(page, 'chat-question-in-view', byTestId(page, 'run-panel'));
});

/** Text with its quoted names, paths and the acronyms both languages use taken out. */
function prose(text) {
  return text.replace(/'[^']*'/g, '').replace(/inputs\/sys\/vars\/nodes|\b(ID|URL|API|HTTP|JSON)\b/g, '');
}

scenario('the Chinese UI words the compile problems in Chinese', async (page) => {
  await apiCall('POST', '/v1/workflows', {
    id: 'e2e_zh_invalid', name: '有问题的流程', version: 1, inputs: [], variables: [],
    nodes: [
      { id: 'start', type: 'start', position: { x: 0, y: 0 } },
      { id: 'sort', type: 'classify_question', position: { x: 280, y: 0 }, config: { model: 'default',
        categories: [{ id: 'a', name: '账单' }, { id: 'a', name: '其他' }] } },
      { id: 'fetch', type: 'http_request', position: { x: 280, y: 220 }, config: { url: '' } },
      { id: 'say', type: 'answer', position: { x: 560, y: 0 }, config: { text: '{{ nope.answer }}' } },
      { id: 'alone', type: 'answer', position: { x: 560, y: 220 }, config: { text: '没人连到我' } },
    ],
    edges: [{ id: 'e1', source: 'start', target: 'sort' }, { id: 'e2', source: 'sort', sourceHandle: 'a', target: 'say' },
      { id: 'e3', source: 'start', target: 'fetch' }],
  });
  await openWorkflow(page, 'e2e_zh_invalid');
  const items = page.locator('[data-testid="checklist-item"]');
  await items.first().waitFor();
  await page.waitForFunction(() => document.querySelectorAll('[data-testid="checklist-item"]').length >= 4);
  const codes = await items.evaluateAll((els) => els.map((e) => e.dataset.code));
  for (const code of ['invalid_config', 'unknown_template_name', 'unreachable']) assert.ok(codes.includes(code), codes.join(', '));
  const texts = await page.locator('[data-testid="checklist-text"]').allInnerTexts();
  for (const text of texts) assert.doesNotMatch(prose(text), /[A-Za-z]{3,}/, `English in a compile problem: ${text}`);
  assert.ok(texts.some((t) => /必须唯一/.test(t)), texts.join(' | '));
  // the node badges' tooltips say the same
  const badge = await byTestId(page, 'node-badge-say').getAttribute('title');
  assert.doesNotMatch(prose(badge), /[A-Za-z]{3,}/, badge);
  await shot(page, 'zh-CN-checklist', byTestId(page, 'checklist'));
  // the field help of the config form, the policy fields included, is Chinese too
  await selectNode(page, 'fetch');
  await byTestId(page, 'config-policy').locator('summary').click();
  // every folded section too (advanced settings)
  await byTestId(page, 'config-panel').evaluate((el) => el.querySelectorAll('details').forEach((d) => { d.open = true; }));
  const helps = await byTestId(page, 'config-panel').locator('.field-help').evaluateAll((els) => els.map((e) => e.textContent));
  assert.ok(helps.length >= 5, helps.join(' | '));
  for (const help of helps) assert.match(help, /[\u4e00-\u9fff]/, `field help not in Chinese: ${help}`);
  await shot(page, 'zh-CN-field-help', byTestId(page, 'config-panel'));
}, { lang: 'zh-CN' });
