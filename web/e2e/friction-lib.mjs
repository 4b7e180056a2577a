/**
 * The gestures shared by the builder-friction browser tests (wrong-results, friction and
 * readme files), with the shared scenario helper (./scenario.mjs) re-exported.
 */
import { byTestId } from './lib.mjs';
import { scenario } from './scenario.mjs';

export { scenario };

export async function fill(page, testId, value) {
  const el = byTestId(page, testId);
  await el.fill(value);
  await el.blur();
}

export async function selectNode(page, id) {
  await byTestId(page, `node-title-${id}`).click();
  await page.locator(`[data-testid="config-panel"][data-node="${id}"]`).waitFor();
}

export async function openRunPanel(page) {
  await byTestId(page, 'run-button').click();
  await byTestId(page, 'run-panel').waitFor();
}

export async function waitRunStatus(page, status, timeout = 30000) {
  await page.waitForFunction((want) =>
    document.querySelector('[data-testid="run-status"]')?.getAttribute('data-status') === want, status, { timeout });
}

/** Waits until the run panel's trace is shown with run status `status`. */
export async function waitTrace(page, status = 'succeeded') {
  await page.waitForFunction((want) => {
    const badge = document.querySelector('[data-testid="trace-status"]');
    return badge && badge.className.includes(`run-${want}`);
  }, status, { timeout: 30000 });
}
