/**
 * `npm run e2e`: the browser tests of web/e2e/ under node's test runner, one file at a
 * time (they share the server). Needs BASE_URL and FLOWLOOM_KEY (the tests under tests/web/
 * set them after starting the servers); extra arguments go to `node --test`. E2E_FILES
 * (comma-separated names such as `canvas.test.mjs`) picks files; unset, every file runs.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const picked = (process.env.E2E_FILES ?? '').split(',').map((f) => f.trim()).filter(Boolean);
const present = readdirSync(here).filter((f) => f.endsWith('.test.mjs')).sort();
const unknown = picked.filter((f) => !present.includes(f));
if (unknown.length) {
  console.error(`E2E_FILES names files that are not in web/e2e/: ${unknown.join(', ')}`);
  process.exit(2);
}
const files = (picked.length ? picked : present).map((f) => join(here, f));
if (!process.env.BASE_URL || !process.env.FLOWLOOM_KEY) {
  console.error('BASE_URL and FLOWLOOM_KEY must be set (run the suite through tests/web/test_canvas_e2e.py)');
  process.exit(2);
}
const result = spawnSync(process.execPath, ['--test', '--test-concurrency=1', ...process.argv.slice(2), ...files],
  { stdio: 'inherit' });
process.exit(result.status ?? 1);
