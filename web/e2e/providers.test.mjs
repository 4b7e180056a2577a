/**
 * Browser tests of the "Model providers" page against a real `flowloom serve` (BASE_URL,
 * FLOWLOOM_KEY) and the scripted model server of tests/web/test_providers_e2e.py, which
 * also plays the tenant's own endpoint: E2E_PROVIDER_URL (its base URL, listing the model
 * E2E_PROVIDER_MODEL at /models) and E2E_PROVIDER_KEY (the key the builder types).
 *
 * The first scenario adds the provider, lists and adds its model, probes it, edits its
 * capabilities and price, makes it the default chat model and chats with a flow whose
 * model is `default`; the second replaces and removes the key (neither finds the key in
 * the page, an API answer or an export); the third overrides an operator model's limits
 * and capabilities for this workspace, then resets them.
 */
import assert from 'node:assert/strict';
import { apiCall, byTestId, openWorkflow, shot } from './lib.mjs';
import { scenario } from './scenario.mjs';

const URL = process.env.E2E_PROVIDER_URL ?? '';
const KEY = process.env.E2E_PROVIDER_KEY ?? '';
const NEW_KEY = process.env.E2E_PROVIDER_NEW_KEY ?? '';
const MODEL = process.env.E2E_PROVIDER_MODEL ?? '';
const PROVIDER = 'openai-compatible';  // the id the server gives the first provider of that preset
/** Fails when a key is in the page's markup, its text or any input's value. */
async function assertNoKeyInPage(page, ...keys) {
  const html = await page.content();
  const values = await page.locator('input, textarea').evaluateAll((els) => els.map((e) => e.value));
  for (const key of keys) {
    assert.ok(!html.includes(key), 'the key is in the page');
    assert.ok(!values.some((v) => v.includes(key)), 'the key is left in a field');
  }
}

/** Fails when a key is in any of these API answers (as raw text). */
async function assertNoKeyInApi(paths, ...keys) {
  for (const path of paths) {
    const text = JSON.stringify(await apiCall('GET', path));
    for (const key of keys) assert.ok(!text.includes(key), `the key is in GET ${path}`);
  }
}

async function openProviders(page) {
  await byTestId(page, 'nav-providers').click();
  await byTestId(page, 'providers-page').waitFor();
}

scenario('add a provider, add its listed model, make it the default and chat with it', async (page) => {
  assert.ok(URL && KEY && MODEL, 'E2E_PROVIDER_URL, E2E_PROVIDER_KEY and E2E_PROVIDER_MODEL must be set');
  await openProviders(page);
  await byTestId(page, 'provider-preset').selectOption('vllm');
  assert.equal(await byTestId(page, 'provider-url').inputValue(), 'http://127.0.0.1:8000/v1', 'the preset fills the URL');
  await byTestId(page, 'provider-preset').selectOption('openai_compatible');
  await byTestId(page, 'provider-name').fill('Team server');
  await byTestId(page, 'provider-url').fill(URL);
  await byTestId(page, 'provider-key').fill(KEY);
  assert.equal(await byTestId(page, 'provider-key').getAttribute('type'), 'password');
  await byTestId(page, 'provider-add').click();
  const keyLine = byTestId(page, `provider-${PROVIDER}-key`);
  await keyLine.waitFor();
  assert.match(await keyLine.innerText(), /sk-…/, 'the key shows masked');
  await assertNoKeyInPage(page, KEY);

  // the endpoint's models, listed with the key, and one added
  await byTestId(page, `provider-${PROVIDER}-list`).click();
  await byTestId(page, `upstream-add-${MODEL}`).click();
  const row = byTestId(page, `model-${PROVIDER}-${MODEL}`);
  await row.waitFor();
  assert.match(await byTestId(page, `model-${PROVIDER}-${MODEL}-caps`).innerText(), /tools: native/);

  // the probe: this endpoint answers tool requests in prose, so its model calls no tools
  await byTestId(page, `model-${PROVIDER}-${MODEL}-probe`).click();
  await byTestId(page, 'probe-report').waitFor();
  assert.match(await byTestId(page, 'probe-report').innerText(), /✗ free_tool_call/);
  await page.waitForFunction((id) => /tools: none/.test(document.querySelector(`[data-testid="${id}"]`)?.textContent ?? ''),
    `model-${PROVIDER}-${MODEL}-caps`);

  // its price, through the model editor
  await byTestId(page, `model-${PROVIDER}-${MODEL}-edit`).click();
  await byTestId(page, `edit-${PROVIDER}-${MODEL}-price-in`).fill('0.5');
  await byTestId(page, `edit-${PROVIDER}-${MODEL}-tools`).selectOption('forced');
  await byTestId(page, `edit-${PROVIDER}-${MODEL}-save`).click();
  await page.waitForFunction((id) => document.querySelector(`[data-testid="${id}"]`)?.textContent?.startsWith('0.5'),
    `model-${PROVIDER}-${MODEL}-price`);
  assert.match(await byTestId(page, `model-${PROVIDER}-${MODEL}-caps`).innerText(), /tools: forced/);

  // the tenant's default chat model
  await byTestId(page, 'default-chat').selectOption(MODEL);
  await byTestId(page, 'save-defaults').click();
  for (let i = 0; i < 50 && (await apiCall('GET', '/v1/model-providers/defaults')).chat !== MODEL; i++) {
    await page.waitForTimeout(100);
  }
  assert.equal((await apiCall('GET', '/v1/model-providers/defaults')).chat, MODEL);
  await shot(page, 'providers-page');

  // a chat flow whose model is `default` answers through the team's endpoint
  const flow = { id: 'team_chat', name: 'Team chat', nodes: [
    { id: 'start', type: 'start', position: { x: 0, y: 100 } },
    { id: 'reply', type: 'chat', position: { x: 260, y: 100 }, config: { model: 'default', user_prompt: '{{ sys.query }}' } },
    { id: 'say', type: 'answer', position: { x: 520, y: 100 }, config: { text: '{{ reply.answer }}' } }],
  edges: [{ id: 'e1', source: 'start', target: 'reply' }, { id: 'e2', source: 'reply', target: 'say' }] };
  await apiCall('POST', '/v1/workflows', flow);
  await openWorkflow(page, 'team_chat');
  await byTestId(page, 'run-button').click();
  await byTestId(page, 'chat-input').fill('hello team');
  await byTestId(page, 'chat-send').click();
  await page.locator('[data-testid="chat-message-assistant"]', { hasText: `Team model ${MODEL} answers: hello team` }).waitFor();
  await assertNoKeyInPage(page, KEY);
  await assertNoKeyInApi(['/v1/model-providers', `/v1/model-providers/${PROVIDER}`, '/v1/node-kinds', '/v1/runs',
    '/v1/workflows/team_chat/export'], KEY);
});

scenario('replace and remove the key: only its masked form is ever shown', async (page) => {
  assert.ok(NEW_KEY, 'E2E_PROVIDER_NEW_KEY must be set');
  await openProviders(page);
  const keyLine = byTestId(page, `provider-${PROVIDER}-key`);
  await keyLine.waitFor();
  const before = await keyLine.innerText();
  await byTestId(page, `provider-${PROVIDER}-edit`).click();
  const field = byTestId(page, `provider-${PROVIDER}-new-key`);
  assert.equal(await field.inputValue(), '', 'the stored key is never put back in a field');
  await field.fill(NEW_KEY);
  await byTestId(page, `provider-${PROVIDER}-save`).click();
  await page.waitForFunction(([id, old]) => {
    const text = document.querySelector(`[data-testid="${id}"]`)?.textContent ?? '';
    return text !== old && text.includes('…');
  }, [`provider-${PROVIDER}-key`, before]);
  await assertNoKeyInPage(page, KEY, NEW_KEY);
  await assertNoKeyInApi(['/v1/model-providers'], KEY, NEW_KEY);
  await byTestId(page, `provider-${PROVIDER}-edit`).click();
  await page.getByRole('button', { name: 'Remove the key' }).click();
  await page.waitForFunction((id) => document.querySelector(`[data-testid="${id}"]`)?.textContent === 'No key',
    `provider-${PROVIDER}-key`);
  assert.equal((await apiCall('GET', `/v1/model-providers/${PROVIDER}`)).api_key_set, false);
});

scenario("override an operator model's limits and capabilities for this workspace, then reset", async (page) => {
  await openProviders(page);
  const row = 'operator-gpt-4o-mini';
  await byTestId(page, row).waitFor();
  assert.match(await byTestId(page, `${row}-caps`).innerText(), /tools: native/);
  await byTestId(page, `${row}-edit`).click();
  await byTestId(page, `${row}-context`).fill('4096');
  await byTestId(page, `${row}-output`).fill('1024');
  await byTestId(page, `${row}-tools`).selectOption('none');
  await byTestId(page, `${row}-save`).click();
  await byTestId(page, `${row}-overridden`).waitFor();
  assert.match(await byTestId(page, `${row}-caps`).innerText(), /tools: none/);
  const seen = await apiCall('GET', '/v1/model-capabilities/gpt-4o-mini');
  assert.equal(seen.max_context, 4096);
  assert.equal(seen.capabilities.tools, 'none');
  assert.equal(seen.registry.capabilities.tools, 'native', "the operator's values stay as they were");
  await shot(page, 'providers-operator-override');
  await byTestId(page, `${row}-reset`).click();
  await byTestId(page, `${row}-overridden`).waitFor({ state: 'detached' });
  assert.match(await byTestId(page, `${row}-caps`).innerText(), /tools: native/);
  assert.deepEqual((await apiCall('GET', '/v1/model-capabilities/gpt-4o-mini')).override, {});
});
