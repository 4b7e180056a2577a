/**
 * A Flowloom trace in Arize Phoenix's UI, in headless Chromium: opens the trace, checks
 * that its span tree shows the expected spans, selects one (its attributes open beside the
 * tree) and saves the screenshot `phoenix-trace` into E2E_SHOTS. Not a `*.test.mjs`: the
 * Phoenix test (tests/workers/rq/test_phoenix_traces.py) runs it against the Phoenix it
 * started, after a run exported its spans there.
 *
 * Environment: PHOENIX_URL (the running `phoenix serve`), TRACE_ID (32 hex digits),
 * EXPECT (a JSON list of span names the tree must show), SELECT (the span to select),
 * E2E_SHOTS. Prints one JSON line: {"shown": [names found], "shot": path}; exits 1 with
 * the reason when a span is missing or the page failed.
 */
import { launch, shot } from './lib.mjs';

const url = process.env.PHOENIX_URL;
const traceId = process.env.TRACE_ID;
const expected = JSON.parse(process.env.EXPECT ?? '[]');
const selected = process.env.SELECT ?? expected[0];
if (!url || !/^[0-9a-f]{32}$/.test(traceId ?? '')) {
  console.error('PHOENIX_URL and TRACE_ID (32 hex digits) must be set');
  process.exit(2);
}

const browser = await launch();
try {
  const page = await (await browser.newContext({ viewport: { width: 1500, height: 950 } })).newPage();
  page.setDefaultTimeout(60000); // Phoenix's first page load compiles a large bundle on a busy machine
  // Phoenix's own route from an OpenTelemetry trace id to the trace's page in its project
  await page.goto(`${url}/redirects/traces/${traceId}`);
  const tree = (name) => page.getByText(name, { exact: true }).first();
  await tree(selected).waitFor();
  const shown = [];
  for (const name of expected) {
    if (await tree(name).isVisible()) shown.push(name);
  }
  await tree(selected).click();
  // the selected span's details beside the tree: its name a second time, in their header
  await page.waitForFunction((name) => document.body.innerText.split(name).length > 2, selected);
  await page.waitForLoadState('networkidle');
  const path = await shot(page, 'phoenix-trace');
  console.log(JSON.stringify({ shown, shot: path }));
} catch (error) {
  console.error(String(error));
  process.exitCode = 1;
} finally {
  await browser.close();
}
