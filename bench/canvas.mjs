/**
 * The browser half of bench/canvas.py: opens a saved workflow in the canvas served by a
 * running `flowloom serve` (headless /usr/bin/chromium through web/node_modules'
 * playwright-core) and prints one JSON object on stdout:
 *
 * - `first_node_ms`: navigation start to the first `.react-flow__node` in the DOM;
 *   `settled_ms`: to when the node count has not changed for 10 frames (`nodes_in_dom`);
 * - `pan`, `drag`, `idle`: frame times (ms between requestAnimationFrame callbacks) over
 *   `frames` frames while the pane is dragged, while one node is dragged, and with nothing
 *   happening (the frame pacing of headless Chromium on this machine: the floor).
 *   One mouse step per frame: each step waits for the next frame before the next.
 *
 * Usage: node bench/canvas.mjs BASE_URL KEY WORKFLOW_ID [FRAMES]
 */
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const { chromium } = createRequire(join(root, 'web', 'package.json'))('playwright-core');
const [baseUrl, key, workflowId, framesArg] = process.argv.slice(2);
const FRAMES = Number(framesArg ?? 120);

function stats(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
  const round = (x) => Math.round(x * 100) / 100;
  return { frames: sorted.length, p50_ms: round(at(0.5)), p95_ms: round(at(0.95)), max_ms: round(sorted[sorted.length - 1]) };
}

/** Records frame deltas in the page until stopped; returns the deltas. */
async function recordFrames(page, gesture) {
  await page.evaluate(() => {
    window.__deltas = [];
    let last = performance.now();
    window.__recording = true;
    const tick = (now) => {
      if (!window.__recording) return;
      window.__deltas.push(now - last);
      last = now;
      requestAnimationFrame(tick);
    };
    requestAnimationFrame((now) => { last = now; requestAnimationFrame(tick); });
  });
  await gesture();
  return page.evaluate(() => { window.__recording = false; return window.__deltas.slice(1); });
}

const nextFrame = (page) => page.evaluate(() => new Promise((r) => requestAnimationFrame(() => r())));

async function dragPath(page, from, dx, dy) {
  await page.mouse.move(from.x, from.y);
  await page.mouse.down();
  for (let i = 1; i <= FRAMES; i += 1) {
    const t = i / FRAMES;
    await page.mouse.move(from.x + dx * Math.sin(t * Math.PI), from.y + dy * t);
    await nextFrame(page);
  }
  await page.mouse.up();
}

const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--disable-quic'] });
try {
  const context = await browser.newContext({ viewport: { width: 1500, height: 950 } });
  await context.addInitScript(([k]) => {
    localStorage.setItem('flowloom.apiKey', k);
    localStorage.setItem('flowloom.lang', 'en');
    // first node and settle times, measured from navigation start by a frame poller
    const poll = () => {
      const n = document.querySelectorAll('.react-flow__node').length;
      if (n && window.__firstNode === undefined) { window.__firstNode = performance.now(); window.__stable = 0; }
      if (window.__firstNode !== undefined && window.__settled === undefined) {
        window.__stable = n === window.__count ? window.__stable + 1 : 0;
        window.__count = n;
        if (window.__stable >= 10) { window.__settled = performance.now(); window.__nodes = n; return; }
      }
      requestAnimationFrame(poll);
    };
    requestAnimationFrame(poll);
  }, [key]);
  const page = await context.newPage();
  await page.goto(`${baseUrl}/#/w/${encodeURIComponent(workflowId)}`);
  await page.waitForFunction(() => window.__settled !== undefined, null, { timeout: 60000 });
  const load = await page.evaluate(() => ({ first_node_ms: Math.round(window.__firstNode),
    settled_ms: Math.round(window.__settled), nodes_in_dom: window.__nodes }));
  const box = await page.locator('[data-testid="canvas"]').boundingBox();
  // an empty spot of the pane to drag from (not a node, edge or control)
  const spot = await page.evaluate(({ x, y, width, height }) => {
    for (let gy = 0.5; gy < 0.95; gy += 0.03) {
      for (let gx = 0.3; gx < 0.7; gx += 0.02) {
        const px = x + width * gx; const py = y + height * gy;
        if (document.elementFromPoint(px, py)?.classList.contains('react-flow__pane')) return { x: px, y: py };
      }
    }
    return null;
  }, box);
  if (!spot) throw new Error('no empty spot of the pane to pan from');
  const idle = await recordFrames(page, async () => { for (let i = 0; i < FRAMES; i += 1) await nextFrame(page); });
  const pan = await recordFrames(page, () => dragPath(page, spot, 300, -200));
  const node = await page.locator('.react-flow__node').nth(1).boundingBox();
  const drag = await recordFrames(page, () => dragPath(page, { x: node.x + node.width / 2, y: node.y + 8 }, 200, 120));
  console.log(JSON.stringify({ ...load, idle: stats(idle), pan: stats(pan), drag: stats(drag) }));
} finally {
  await browser.close();
}
