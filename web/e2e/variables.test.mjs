/**
 * Browser tests of what a node may read and of conversation variables, against a real
 * `flowloom serve` (BASE_URL, FLOWLOOM_KEY); run through tests/web/test_variables_e2e.py.
 *
 * - The variable picker inside an iteration body offers the iteration's item and index
 *   before its collect field is set, and neither the iteration's own results nor the
 *   nodes of a sibling iteration's body (the compiler's own rule, asked of the server).
 * - Conversation variables declared in the workflow panel, counted by a variable update
 *   node over three chat turns of the chat preview (1, 2, 3), then edited in the preview
 *   between turns: the next turn starts from the edited value.
 */
import assert from 'node:assert/strict';
import { apiCall, byTestId, openWorkflow, shot, waitDraft, waitSaved } from './lib.mjs';
import { scenario } from './scenario.mjs';

async function selectNode(page, id) {
  await byTestId(page, `node-title-${id}`).click();
  await byTestId(page, 'config-node-id').waitFor();
  assert.equal(await byTestId(page, 'config-node-id').inputValue(), id);
}

/** Opens the picker of template field `field` of the selected node; the paths it offers. */
async function pickerPaths(page, field) {
  await byTestId(page, `config-${field}-insert`).click();
  const picker = byTestId(page, 'variable-picker');
  // the global inputs are always offered: once they are listed, the whole answer is
  await picker.locator('[data-testid="var-inputs.list"]').waitFor();
  const ids = await picker.locator('[data-testid^="var-"]').evaluateAll((els) => els.map((e) => e.dataset.testid));
  return ids.map((id) => id.slice('var-'.length));
}

const pos = (x, y) => ({ x, y });
const ITERATIONS = {
  id: 'e2e_iter_scope', name: 'Iteration scope',
  inputs: [{ name: 'list', type: 'array' }],
  nodes: [
    { id: 'start', type: 'start', position: pos(0, 120) },
    { id: 'it', type: 'iteration', title: 'Each item', position: pos(260, 0), width: 520, height: 200,
      config: { items: { ref: 'inputs.list' } } },
    { id: 'ask', type: 'template', parent: 'it', position: pos(30, 60), config: { template: 'item' } },
    { id: 'fmt', type: 'template', parent: 'it', position: pos(280, 60), config: { template: 'x' } },
    { id: 'it2', type: 'iteration', title: 'Other items', position: pos(260, 320), width: 320, height: 200,
      config: { items: { ref: 'inputs.list' }, collect: { ref: 'other.output' } } },
    { id: 'other', type: 'template', parent: 'it2', position: pos(40, 60), config: { template: 'y' } },
    { id: 'after', type: 'template', position: pos(900, 120), config: { template: 'done' } },
  ],
  edges: [
    { id: 'e1', source: 'start', target: 'it' }, { id: 'e2', source: 'ask', target: 'fmt' },
    { id: 'e3', source: 'start', target: 'it2' }, { id: 'e4', source: 'it', target: 'after' },
  ],
};

scenario('the picker inside an iteration body offers item and index, not the results or another body', async (page) => {
  await apiCall('POST', '/v1/workflows', ITERATIONS);
  await openWorkflow(page, ITERATIONS.id);
  await selectNode(page, 'fmt');
  const inBody = await pickerPaths(page, 'template');
  for (const path of ['it.item', 'it.index', 'ask.output', 'inputs.list']) {
    assert.ok(inBody.includes(path), `${path} is offered in the body (offered: ${inBody.join(', ')})`);
  }
  for (const path of ['it.results', 'it.count', 'it.statuses', 'other.output', 'it2.results', 'fmt.output']) {
    assert.ok(!inBody.includes(path), `${path} is not offered in the body (offered: ${inBody.join(', ')})`);
  }
  await shot(page, 'picker-iteration-body', byTestId(page, 'config-panel'));
  await byTestId(page, 'var-it.item').click();
  assert.match(await byTestId(page, 'config-template').inputValue(), /\{\{ it\.item \}\}/);
  // downstream of the iteration: its results, never its per-item values or its body
  await selectNode(page, 'after');
  const downstream = await pickerPaths(page, 'template');
  assert.ok(downstream.includes('it.results') && downstream.includes('it.count'), downstream.join(', '));
  for (const path of ['it.item', 'it.index', 'fmt.output', 'ask.output']) {
    assert.ok(!downstream.includes(path), `${path} is not offered downstream (offered: ${downstream.join(', ')})`);
  }
  await waitDraft(ITERATIONS.id, (d) => d.nodes.find((n) => n.id === 'fmt')?.config?.template?.includes('it.item'));
});

const COUNTER = {
  id: 'e2e_counter', name: 'Counter',
  nodes: [
    { id: 'start', type: 'start', position: pos(0, 0) },
    { id: 'bump', type: 'variable_update', position: pos(260, 0),
      config: { updates: [{ variable: 'conversation.count', operation: 'add', value: 1 }] } },
    { id: 'say', type: 'answer', position: pos(520, 0), config: { text: 'count={{ conversation.count }}' } },
  ],
  edges: [{ id: 'e1', source: 'start', target: 'bump' }, { id: 'e2', source: 'bump', target: 'say' }],
};

async function sendTurn(page, text, answer) {
  await byTestId(page, 'chat-input').fill(text);
  await byTestId(page, 'chat-send').click();
  await page.locator('[data-testid="chat-message-assistant"]', { hasText: answer }).waitFor({ timeout: 30000 });
  // the preview reads the chat's values again once the turn has ended
  await page.waitForFunction((want) => document.querySelector('[data-testid="chat-var-input-count"]')?.value === want,
    answer.replace('count=', ''), { timeout: 15000 });
}

scenario('conversation variables count 1, 2, 3 over chat turns and an edit changes the next turn', async (page) => {
  await apiCall('POST', '/v1/workflows', COUNTER);  // reads conversation.count, not declared yet
  await openWorkflow(page, COUNTER.id);
  await byTestId(page, 'tab-workflow').click();
  await byTestId(page, 'workflow-conversation-add').click();
  await byTestId(page, 'workflow-conversation-name-0').fill('count');
  await byTestId(page, 'workflow-conversation-type-0').selectOption('number');
  await byTestId(page, 'workflow-conversation-default-0').fill('0');
  await waitDraft(COUNTER.id, (d) => d.conversation_variables?.[0]?.name === 'count'
    && d.conversation_variables[0].type === 'number' && d.conversation_variables[0].default === 0);
  await waitSaved(page);
  await shot(page, 'conversation-declared', byTestId(page, 'workflow-panel'));

  await byTestId(page, 'run-button').click();
  await byTestId(page, 'run-panel').waitFor();
  await byTestId(page, 'run-tab-chat').click();
  await byTestId(page, 'chat-variables').waitFor();
  assert.equal(await byTestId(page, 'chat-var-input-count').inputValue(), '0', 'a new chat shows the default');
  await sendTurn(page, 'one', 'count=1');
  await sendTurn(page, 'two', 'count=2');
  await sendTurn(page, 'three', 'count=3');
  await shot(page, 'conversation-three-turns', byTestId(page, 'run-panel'));

  await byTestId(page, 'chat-var-input-count').fill('10');
  await byTestId(page, 'chat-var-save-count').click();
  const chatId = (await byTestId(page, 'chat-id').innerText()).replace(/^Chat /, '');
  const deadline = Date.now() + 15000;
  while ((await apiCall('GET', `/v1/chats/${chatId}/variables`)).variables.count !== 10) {
    assert.ok(Date.now() < deadline, 'the edited value reaches the chat');
    await new Promise((r) => setTimeout(r, 200));
  }
  await sendTurn(page, 'four', 'count=11');
  const answers = await page.locator('[data-testid="chat-message-assistant"]').allInnerTexts();
  assert.deepEqual(answers.map((a) => a.trim()), ['count=1', 'count=2', 'count=3', 'count=11']);
});
