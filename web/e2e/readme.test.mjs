/**
 * The scenarios behind the README's screenshots, driven as the README tells a newcomer
 * (tests/web/screenshots.py copies their PNGs into web/screenshots/; its table names the
 * screenshot each README image comes from, and a test checks that every image the README
 * shows is one of these). Run through tests/web/test_readme_e2e.py.
 */
import assert from 'node:assert/strict';
import { byTestId, shot } from './lib.mjs';
import { fill, openRunPanel, scenario, selectNode, waitRunStatus, waitTrace } from './friction-lib.mjs';

scenario('README: the Grade router example after a run', async (page) => {
  await page.setViewportSize({ width: 1440, height: 860 });
  await byTestId(page, 'workflow-grade_router').click();
  await byTestId(page, 'node-route').waitFor();
  await openRunPanel(page);
  await byTestId(page, 'run-tab-run').click();
  await fill(page, 'run-input-score', '93');
  await byTestId(page, 'run-start').click();
  await waitRunStatus(page, 'succeeded');
  await waitTrace(page);
  assert.match(await byTestId(page, 'run-answer').innerText(), /Excellent work, Student: 93\/100/);
  assert.match(await byTestId(page, 'node-status-msg_fail').getAttribute('class'), /run-skipped/);
  await selectNode(page, 'route');
  await byTestId(page, 'fit-button').click();
  await page.waitForTimeout(500);
  await shot(page, 'readme-canvas-run');
});
