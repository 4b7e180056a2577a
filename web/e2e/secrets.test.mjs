/**
 * Browser scenario of environment variables and secrets, against a real `flowloom
 * serve` (tests/web/test_secrets_e2e.py starts it, with a local HTTP server at
 * E2E_ECHO_URL that records what it receives, and passes the secret as E2E_SECRET).
 *
 * A builder declares a secret in the workflow panel's Environment section, types its
 * value once, uses it in an HTTP node's header through the variable picker and runs
 * the flow; the value is never visible afterwards: not in the page's text, not in any
 * input's value, not in the trace, not in the exported file, not in the API's answers.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { apiCall, byTestId, openWorkflow, shot, SHOTS, waitDraft, waitSaved } from './lib.mjs';
import { scenario } from './scenario.mjs';

const SECRET = process.env.E2E_SECRET ?? 'sk-e2e-missing';
const ECHO = process.env.E2E_ECHO_URL ?? 'http://127.0.0.1:9';
const WID = 'e2e_secret';
/** The page's visible text and the values of all its fields, which must never hold the secret. */
async function assertNotShown(page, where) {
  const text = await page.evaluate(() => document.body.innerText);
  assert.ok(!text.includes(SECRET), `the secret is in the page's text (${where})`);
  const values = await page.evaluate(() => [...document.querySelectorAll('input, textarea, select')].map((e) => e.value));
  assert.ok(!values.some((v) => v.includes(SECRET)), `the secret is in a field's value (${where})`);
  const html = await page.content();
  assert.ok(!html.includes(SECRET), `the secret is in the page's HTML (${where})`);
}

scenario('a secret used by an HTTP node is never visible in the UI, the export, the API or the trace', async (page) => {
  await apiCall('POST', '/v1/workflows', {
    id: WID, name: 'Secret hook',
    nodes: [
      { id: 'start', type: 'start', position: { x: 0, y: 0 } },
      { id: 'call', type: 'http_request', name: 'Call the hook', position: { x: 280, y: 0 },
        config: { url: `${ECHO}/hook`, method: 'GET', timeout: 10 } },
      { id: 'end', type: 'end', position: { x: 560, y: 0 },
        config: { outputs: [{ name: 'code', value: { ref: 'call.status_code' } }] } },
    ],
    edges: [{ id: 'e1', source: 'start', target: 'call' }, { id: 'e2', source: 'call', target: 'end' }],
  });
  await openWorkflow(page, WID);

  // declare the secret in the Environment section and give its value once
  await byTestId(page, 'tab-workflow').click();
  await byTestId(page, 'env-add').click();
  await byTestId(page, 'env-name-0').fill('API_TOKEN');
  await byTestId(page, 'env-type-0').selectOption('secret');
  await waitDraft(WID, (d) => d.environment?.[0]?.name === 'API_TOKEN' && d.environment[0].type === 'secret');
  await byTestId(page, 'env-secret-status-API_TOKEN').waitFor();
  assert.equal(await byTestId(page, 'env-secret-status-API_TOKEN').getAttribute('data-set'), 'false');
  assert.equal(await byTestId(page, 'env-secret-input-API_TOKEN').getAttribute('type'), 'password');
  await byTestId(page, 'env-secret-input-API_TOKEN').fill(SECRET);
  await byTestId(page, 'env-secret-save-API_TOKEN').click();
  await page.waitForFunction(() => document.querySelector('[data-testid="env-secret-status-API_TOKEN"]')
    ?.getAttribute('data-set') === 'true');
  assert.equal(await byTestId(page, 'env-secret-input-API_TOKEN').inputValue(), '', 'write-only: the field empties');
  await shot(page, 'secrets-environment', byTestId(page, 'workflow-panel'));
  await assertNotShown(page, 'after setting it');

  // use it in the HTTP node's header through the variable picker
  await byTestId(page, 'node-title-call').click();
  await byTestId(page, 'config-node-id').waitFor();
  await byTestId(page, 'config-add-headers').click();
  await byTestId(page, 'config-kv-key-headers.0').fill('Authorization');
  await byTestId(page, 'config-headers.0').fill('Bearer ');
  await byTestId(page, 'config-headers.0-insert').click();
  await byTestId(page, 'var-env.API_TOKEN').click();
  assert.equal(await byTestId(page, 'config-headers.0').inputValue(), 'Bearer {{ env.API_TOKEN }}');
  await waitDraft(WID, (d) => d.nodes.find((n) => n.id === 'call')?.config?.headers?.Authorization
    === 'Bearer {{ env.API_TOKEN }}');
  await waitSaved(page);

  // run it: the node succeeds (the server checks what the hook received)
  await page.waitForFunction(() => !document.querySelector('[data-testid="run-button"]')?.hasAttribute('disabled'));
  await byTestId(page, 'run-button').click();
  await byTestId(page, 'run-panel').waitFor();
  await byTestId(page, 'run-start').click();
  await page.waitForFunction(() => document.querySelector('[data-testid="run-status"]')?.getAttribute('data-status')
    === 'succeeded', null, { timeout: 30000 });
  await byTestId(page, 'trace-node-call').locator('summary').click();
  await byTestId(page, 'trace-outputs-call').waitFor();
  assert.match(await byTestId(page, 'trace-outputs-call').innerText(), /200/);
  await shot(page, 'secrets-trace', byTestId(page, 'run-panel'));
  await assertNotShown(page, 'after the run, trace open');

  // the history's stored run and its trace
  const runs = (await apiCall('GET', `/v1/runs?workflow_id=${WID}`)).runs;
  assert.ok(runs.length >= 1);
  for (const run of runs) {
    const detail = JSON.stringify(await apiCall('GET', `/v1/runs/${run.run_id}`));
    assert.ok(!detail.includes(SECRET), 'the secret is in a stored run');
  }
  assert.ok(!JSON.stringify(await apiCall('GET', `/v1/workflows/${WID}`)).includes(SECRET));
  const status = await apiCall('GET', `/v1/workflows/${WID}/secrets`);
  assert.deepEqual(status.secrets.map((s) => [s.name, s.set]), [['API_TOKEN', true]]);

  // the export names the secret, with an empty value
  const [download] = await Promise.all([page.waitForEvent('download'), byTestId(page, 'export-button').click()]);
  const file = join(SHOTS, `${WID}.export.json`);
  await download.saveAs(file);
  const text = readFileSync(file, 'utf8');
  assert.ok(!text.includes(SECRET), 'the secret is in the export');
  assert.deepEqual(JSON.parse(text).environment, [{ name: 'API_TOKEN', type: 'secret', value: '' }]);

  // reloaded, the Environment section still says only "set"
  await page.reload();
  await byTestId(page, 'canvas').waitFor();
  await byTestId(page, 'tab-workflow').click();
  await page.waitForFunction(() => document.querySelector('[data-testid="env-secret-status-API_TOKEN"]')
    ?.getAttribute('data-set') === 'true');
  await assertNotShown(page, 'after a reload');
});
