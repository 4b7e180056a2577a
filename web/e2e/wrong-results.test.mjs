/**
 * Browser tests of three wrong results a builder met in the canvas, each checked where
 * the builder saw it (the run panel, its trace, the history), against a real `flowloom
 * serve` whose models are the scripted server of tests/web/test_wrong_results_e2e.py
 * (every answer `Scripted answer to: <prompt>`, 12 tokens in and 6 out):
 *
 * - a re-run from the failed HTTP node of a router run never puts the skipped greeting
 *   branch's text into the answer;
 * - model calls inside an iteration count in the run's tokens and cost (trace header,
 *   and the same run picked from the history);
 * - a workflow ending in End nodes with an LLM inside an iteration: the answer box gets
 *   no item text run together, and the run panel shows the End outputs.
 */
import assert from 'node:assert/strict';
import { apiCall, BASE_URL, byTestId, openWorkflow, shot, waitDraft } from './lib.mjs';
import { fill, openRunPanel, scenario, selectNode, waitRunStatus, waitTrace } from './friction-lib.mjs';

/** A local port nothing listens on: the HTTP node fails (connection refused). */
const CLOSED = 'http://127.0.0.1:9/weather';

function weatherRouter(url) {
  return {
    id: 'e2e_weather_router', name: 'Weather router', version: 1, variables: [],
    inputs: [{ name: 'city', type: 'string', default: '' }],
    nodes: [
      { id: 'start', type: 'start', position: { x: 0, y: 100 } },
      { id: 'route', type: 'if_else', position: { x: 260, y: 100 }, config: { cases: [{ id: 'greet', conditions: [
        { left: { ref: 'inputs.city' }, operator: 'equals', right: '' }] }] } },
      { id: 'hello', type: 'answer', position: { x: 540, y: 0 }, config: { text: 'Hello! How can I help you today?' } },
      { id: 'fetch', type: 'http_request', position: { x: 540, y: 200 }, config: { url, timeout: 10 } },
      { id: 'say', type: 'answer', position: { x: 820, y: 200 }, config: { text: 'Weather in the city: {{ fetch.status_code }}' } },
    ],
    edges: [{ id: 'e1', source: 'start', target: 'route' },
      { id: 'e2', source: 'route', sourceHandle: 'greet', target: 'hello' },
      { id: 'e3', source: 'route', sourceHandle: 'else', target: 'fetch' },
      { id: 'e4', source: 'fetch', target: 'say' }],
  };
}

/** start -> iteration over `items` (an LLM per item, on a priced model) -> End(lines). */
const SUMMARIZE_EACH = {
  id: 'e2e_summarize_each', name: 'Summarize each', version: 1, variables: [],
  inputs: [{ name: 'items', type: 'array', required: true }],
  nodes: [
    { id: 'start', type: 'start', position: { x: 0, y: 60 } },
    { id: 'each', type: 'iteration', position: { x: 260, y: 0 },
      config: { items: { ref: 'inputs.items' }, collect: { ref: 'line.answer' } } },
    { id: 'line', type: 'chat', parent: 'each', position: { x: 60, y: 90 },
      config: { model: 'gpt-4o', user_prompt: '{{ each.item }}' } },
    { id: 'end', type: 'end', position: { x: 760, y: 60 },
      config: { outputs: [{ name: 'lines', value: { ref: 'each.results' } }] } },
  ],
  edges: [{ id: 'e1', source: 'start', target: 'each' }, { id: 'e2', source: 'each', target: 'end' }],
};

async function runWithItems(page, items) {
  await openWorkflow(page, SUMMARIZE_EACH.id);
  await openRunPanel(page);
  await byTestId(page, 'run-tab-run').click();
  await fill(page, 'run-input-items', JSON.stringify(items));
  await byTestId(page, 'run-start').click();
  await waitRunStatus(page, 'succeeded');
  await waitTrace(page);
}

scenario('a re-run from the failed node of a router run never says the skipped branch', async (page) => {
  await apiCall('POST', '/v1/workflows', weatherRouter(CLOSED));
  await openWorkflow(page, 'e2e_weather_router');
  await openRunPanel(page);
  await byTestId(page, 'run-tab-run').click();
  await fill(page, 'run-input-city', 'Oslo');
  await byTestId(page, 'run-start').click();
  await waitRunStatus(page, 'failed');
  assert.match(await byTestId(page, 'node-status-hello').getAttribute('class'), /run-skipped/);
  // the builder fixes the HTTP node's URL (this server's own health check answers)
  await selectNode(page, 'fetch');
  await fill(page, 'config-url', `${BASE_URL}/health`);
  await waitDraft('e2e_weather_router', (d) => d.nodes.some((n) => n.config?.url?.endsWith('/health')));
  await byTestId(page, 'run-tab-history').click();
  await page.locator('[data-testid^="history-run-"][data-status="failed"]').first().click();
  await waitRunStatus(page, 'replay');
  await byTestId(page, 'trace-node-fetch').locator('summary').click();
  await byTestId(page, 'rerun-fetch').click();
  await waitRunStatus(page, 'succeeded');
  const answer = await byTestId(page, 'run-answer').innerText();
  assert.equal(answer.trim(), 'Weather in the city: 200');
  assert.doesNotMatch(answer, /Hello/);
  assert.match(await byTestId(page, 'node-status-hello').getAttribute('class'), /run-skipped/);
  const runs = (await apiCall('GET', '/v1/runs?workflow_id=e2e_weather_router')).runs;
  const rerun = await apiCall('GET', `/v1/runs/${runs.find((r) => r.status === 'succeeded').run_id}`);
  assert.equal(rerun.answer, 'Weather in the city: 200');
  await shot(page, 'rerun-router-answer', byTestId(page, 'run-panel'));
});

scenario('model calls inside an iteration count in the run tokens and cost', async (page) => {
  await apiCall('POST', '/v1/workflows', SUMMARIZE_EACH);
  await runWithItems(page, ['alpha', 'beta', 'gamma']);
  // three calls of 12 tokens in and 6 out on gpt-4o ($0.0025 / $0.01 per 1k)
  const head = byTestId(page, 'trace').locator('.trace-head');
  assert.match(await head.innerText(), /tokens 36\/18/);
  assert.match(await head.innerText(), /cost \$0\.000270/);
  const runId = (await apiCall('GET', `/v1/runs?workflow_id=${SUMMARIZE_EACH.id}`)).runs[0].run_id;
  // the same totals on the run picked from the history, and in the API's list
  await byTestId(page, 'run-tab-history').click();
  await byTestId(page, `history-run-${runId}`).click();
  await waitRunStatus(page, 'replay');
  assert.match(await byTestId(page, 'trace').locator('.trace-head').innerText(), /tokens 36\/18/);
  const listed = (await apiCall('GET', `/v1/runs?workflow_id=${SUMMARIZE_EACH.id}`)).runs[0];
  assert.equal(listed.tokens_in, 36);
  assert.equal(listed.tokens_out, 18);
  await shot(page, 'iteration-tokens', byTestId(page, 'run-panel'));
});

scenario('an End workflow with an LLM in an iteration shows its outputs, not items run together', async (page) => {
  await runWithItems(page, ['one', 'two']);
  // the End streams its output once it has its value (a list, not an LLM's text): the
  // answer box shows the whole list, never the items run together
  const answer = (await byTestId(page, 'run-answer').innerText()).trim();
  assert.deepEqual(JSON.parse(answer), ['Scripted answer to: one', 'Scripted answer to: two']);
  const outputs = byTestId(page, 'run-outputs');
  await outputs.waitFor();
  const lines = await byTestId(page, 'run-output-lines').innerText();
  assert.deepEqual(JSON.parse(lines.slice(lines.indexOf('['))), ['Scripted answer to: one', 'Scripted answer to: two']);
  await shot(page, 'end-outputs', byTestId(page, 'run-panel'));
  // a past run picked from the history shows its outputs too
  const runId = (await apiCall('GET', `/v1/runs?workflow_id=${SUMMARIZE_EACH.id}`)).runs[0].run_id;
  await byTestId(page, 'run-tab-history').click();
  await byTestId(page, `history-run-${runId}`).click();
  await waitRunStatus(page, 'replay');
  await byTestId(page, 'run-tab-run').click();
  assert.match(await byTestId(page, 'run-output-lines').innerText(), /Scripted answer to: two/);
});
