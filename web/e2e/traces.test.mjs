/**
 * Browser tests of "Run this node" and the readable traces, against a real
 * `flowloom serve` (BASE_URL, FLOWLOOM_KEY) whose model is the scripted responder of
 * tests/web/test_traces_e2e.py. Run through that test; screenshots go to E2E_SHOTS.
 *
 * - the variable picker names (and finds) a node by its title;
 * - one node run from its panel: what it reads, a missing value named, typed values,
 *   the result and its badge on the canvas, the values of its last run prefilled, the
 *   run in the History tab by the node's title;
 * - an iteration's per-item trace (item, status, duration, each body node's outputs)
 *   and node titles in the trace and the History rows (status, duration, first input,
 *   tokens);
 * - a tool-calling agent's timeline: thought, tool call with its arguments and result,
 *   answer; and a model node's sent messages.
 */
import assert from 'node:assert/strict';
import { apiCall, byTestId, openWorkflow, shot } from './lib.mjs';
import { scenario } from './scenario.mjs';

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

const at = (x, y) => ({ x, y });

scenario('one node runs alone from its panel and shows its last run', async (page) => {
  await apiCall('POST', '/v1/workflows', {
    id: 'e2e_one_node', name: 'One node', version: 1, inputs: [{ name: 'city', type: 'string' }], variables: [],
    nodes: [
      { id: 'start', type: 'start', position: at(0, 0) },
      { id: 'shout', type: 'template', name: 'Shout the city', position: at(250, 0),
        config: { template: '{{ inputs.city | upper }}!' } },
      { id: 'ask', type: 'chat', name: 'Ask the model', position: at(500, 0),
        config: { model: 'default', user_prompt: 'Weather in {{ shout.output }}?' } },
      { id: 'end', type: 'end', position: at(750, 0), config: { outputs: [{ name: 'a', value: { ref: 'ask.answer' } }] } },
    ],
    edges: [{ id: 'e1', source: 'start', target: 'shout' }, { id: 'e2', source: 'shout', target: 'ask' },
      { id: 'e3', source: 'ask', target: 'end' }],
  });
  await openWorkflow(page, 'e2e_one_node');
  await selectNode(page, 'ask');
  // the variable picker names the node a variable comes from by its title, and finds it by it
  await byTestId(page, 'config-user_prompt-insert').click();
  await byTestId(page, 'variable-picker').waitFor();
  assert.match(await byTestId(page, 'var-shout.output').innerText(), /Shout the city\s+shout\.output/);
  await byTestId(page, 'variable-picker').locator('input[type="search"]').fill('shout the');
  assert.equal(await page.locator('[data-testid="variable-picker"] .var-item').count(), 1);
  await page.keyboard.press('Escape');
  await byTestId(page, 'variable-picker').waitFor({ state: 'detached' });
  await byTestId(page, 'node-run-toggle').click();
  const field = byTestId(page, 'node-run-input-shout.output');
  await field.waitFor();
  await byTestId(page, 'node-run-never').waitFor();
  assert.match(await byTestId(page, 'node-run').innerText(), /Shout the city/, 'the node read is named by its title');

  await byTestId(page, 'node-run-start').click();
  const refused = byTestId(page, 'node-run-error');
  await refused.waitFor();
  assert.match(await refused.innerText(), /'shout\.output'/, 'a missing value is named');

  await field.fill('LIMA!');
  await byTestId(page, 'node-run-start').click();
  const last = byTestId(page, 'node-run-last');
  await page.waitForFunction(() =>
    document.querySelector('[data-testid="node-run-last"]')?.getAttribute('data-status') === 'succeeded', null,
  { timeout: 30000 });
  assert.match(await byTestId(page, 'node-run-outputs').innerText(), /Scripted answer to: Weather in LIMA!\?/);
  assert.match(await byTestId(page, 'node-run-duration').innerText(), /\d+ (ms|s)/);
  assert.match(await byTestId(page, 'node-status-ask').getAttribute('class'), /run-succeeded/,
    'the node shows its last run on the canvas');
  await shot(page, 'run-one-node', byTestId(page, 'node-run'));

  // another node, then back: the last run's values fill the form again
  await selectNode(page, 'shout');
  await selectNode(page, 'ask');
  await byTestId(page, 'node-run-toggle').click();
  await last.waitFor();
  await page.waitForFunction(() =>
    document.querySelector('[data-testid="node-run-input-shout.output"]')?.value === 'LIMA!', null, { timeout: 15000 });

  await openRunPanel(page);
  await byTestId(page, 'run-tab-history').click();
  const row = page.locator('[data-kind="single_node"]');
  await row.first().waitFor();
  assert.equal(await row.count(), 1);
  assert.match(await row.first().innerText(), /node Ask the model/);
  assert.match(await row.first().innerText(), /\d+ tokens/);
  await row.first().click();
  await byTestId(page, 'trace-single').waitFor();
  assert.match(await byTestId(page, 'trace-single').innerText(), /only Ask the model/);
  assert.equal(await byTestId(page, 'trace-node-shout').getAttribute('data-given'), 'true');
});

scenario('an iteration shows each item, titles show in the trace and the history', async (page) => {
  await apiCall('POST', '/v1/workflows', {
    id: 'e2e_items', name: 'Items', version: 1, variables: [],
    inputs: [{ name: 'colours', type: 'array', default: ['red', 'green', 'blue'] }],
    nodes: [
      { id: 'start', type: 'start', position: at(0, 0) },
      { id: 'each', type: 'iteration', name: 'For each colour', position: at(250, 0),
        config: { items: { ref: 'inputs.colours' }, collect: { ref: 'loud.output' } } },
      { id: 'loud', type: 'template', name: 'Make it loud', parent: 'each', position: at(40, 60),
        config: { template: '{{ each.item | upper }}!' } },
      { id: 'end', type: 'end', position: at(750, 0), config: { outputs: [{ name: 'all', value: { ref: 'each.results' } }] } },
    ],
    edges: [{ id: 'e1', source: 'start', target: 'each' }, { id: 'e2', source: 'each', target: 'end' }],
  });
  await openWorkflow(page, 'e2e_items');
  await openRunPanel(page);
  await byTestId(page, 'run-start').click();
  await waitRunStatus(page, 'succeeded');
  const each = byTestId(page, 'trace-node-each');
  await each.waitFor();
  assert.match(await each.locator('summary').first().innerText(), /For each colour\s+each/, 'title first, id second');
  assert.equal(await byTestId(page, 'trace-node-loud').count(), 0, 'body runs show under their item, not at the top');
  await each.locator('summary').first().click();
  const items = page.locator('[data-testid^="trace-item-each-"]');
  await items.first().waitFor();
  assert.equal(await items.count(), 3);
  const second = byTestId(page, 'trace-item-each-1');
  assert.equal(await second.getAttribute('data-status'), 'succeeded');
  assert.match(await second.locator('summary').first().innerText(), /Item 1\s+green\s+\d+ (ms|s)/);
  await second.locator('summary').first().click();
  const body = byTestId(page, 'trace-item-node-each-1-loud');
  await body.waitFor();
  assert.match(await body.innerText(), /Make it loud/);
  assert.match(await body.innerText(), /GREEN!/);
  await shot(page, 'trace-iteration-items', byTestId(page, 'run-panel'));

  await byTestId(page, 'run-tab-history').click();
  const row = page.locator('[data-kind="workflow"]').first();
  await row.waitFor();
  const text = await row.innerText();
  assert.match(text, /succeeded/);
  assert.match(text, /\d+ (ms|s)/, 'duration');
  assert.match(text, /\["red", "green", "blue"\]/, 'the first input');
  assert.match(text, /0 tokens/);
});

scenario('a tool-calling agent shows a timeline and a model node what it sent', async (page) => {
  await apiCall('POST', '/v1/workflows', {
    id: 'e2e_timeline', name: 'Timeline', version: 1, inputs: [], variables: [],
    nodes: [
      { id: 'start', type: 'start', position: at(0, 0) },
      { id: 'calc', type: 'agent', name: 'Calculator agent', position: at(250, 0),
        config: { model: 'default', user_prompt: '{{ sys.query }}', builtin_tools: [{ name: 'eval_expression' }] } },
      { id: 'ask', type: 'chat', name: 'Explain', position: at(500, 0),
        config: { model: 'default', system_prompt: 'Be brief.', user_prompt: 'Explain {{ calc.answer }}' } },
      { id: 'end', type: 'end', position: at(750, 0), config: { outputs: [{ name: 'a', value: { ref: 'ask.answer' } }] } },
    ],
    edges: [{ id: 'e1', source: 'start', target: 'calc' }, { id: 'e2', source: 'calc', target: 'ask' },
      { id: 'e3', source: 'ask', target: 'end' }],
  });
  await openWorkflow(page, 'e2e_timeline');
  await openRunPanel(page);
  await byTestId(page, 'run-tab-run').click();  // it reads sys.query: the panel opens on the chat
  await byTestId(page, 'run-message').fill('What is 6 times 7?');
  await byTestId(page, 'run-start').click();
  await waitRunStatus(page, 'succeeded');
  const agent = byTestId(page, 'trace-node-calc');
  await agent.waitFor();
  assert.match(await agent.locator('summary').first().innerText(), /Calculator agent/);
  await agent.locator('summary').first().click();
  await byTestId(page, 'trace-timeline-calc').waitFor();
  assert.match(await byTestId(page, 'trace-thought-calc-0').innerText(), /Thought\s+I will compute 6 \* 7\./i);
  const call = byTestId(page, 'trace-call-calc-0-0');
  const callText = await call.innerText();
  assert.match(callText, /Calls tool eval_expression/i);
  assert.match(callText, /"expression": "6 \* 7"/, 'the arguments, as pretty JSON');
  assert.match(callText, /Result\s+42/i, 'the tool result');
  assert.match(await byTestId(page, 'trace-answer-calc-1').innerText(), /Answer\s+The answer is 42\./i);
  assert.doesNotMatch(await byTestId(page, 'trace-timeline-calc').innerText(), /"tool_calls"/, 'no raw JSON');
  await shot(page, 'trace-agent-timeline', byTestId(page, 'run-panel'));

  const explain = byTestId(page, 'trace-node-ask');
  await explain.locator('summary').first().click();
  const sent = byTestId(page, 'trace-sent-ask');
  await sent.waitFor();
  assert.match(await sent.innerText(), /system\s+[\s\S]*Be brief\./i);
  assert.match(await sent.innerText(), /user\s+Explain The answer is 42\./i, 'the rendered prompt, not the template');
  assert.match(await byTestId(page, 'trace-received-ask').innerText(), /Scripted answer to: Explain The answer is 42\./);
});
