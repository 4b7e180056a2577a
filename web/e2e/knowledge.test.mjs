/**
 * Browser tests of the Knowledge section against a real `flowloom serve` (BASE_URL,
 * FLOWLOOM_KEY) whose models are the scripted model server of
 * tests/web/test_knowledge_e2e.py (its embeddings: a hashed bag of words; its chat
 * model answers from the first quote it is given, citing it as [1]). Run through that
 * pytest file, which starts the servers; screenshots go to E2E_SHOTS.
 *
 * The scenarios run in order: the second one uses the dataset the first one created.
 * E2E_SIGNALS: a folder shared with the pytest driver, which holds the scripted
 * server's embeddings until this file writes `release-embeddings` there (so a document
 * is seen waiting in `embedding`); unset, nothing is held and that check is skipped.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { apiCall, byTestId, openWorkflow, shot, waitDraft } from './lib.mjs';
import { scenario } from './scenario.mjs';

const EMBEDDING_MODEL = 'text-embedding-3-small';
const FLOW = 'kb_chat';
// the dataset the first scenario creates, which the second one uses
let datasetId = null;
const RETURNS_TXT = 'Refunds are paid to the original card within 14 days after the returned item arrives. '
  + 'A refund needs the original receipt.\n';
const SHIPPING_MD = '# Shipping\n\n## Standard\n\nStandard parcels to Europe take five working days.\n\n'
  + '## Express\n\nExpress parcels arrive in two days, tracked all the way.\n\n'
  + '## Opening hours\n\nThe shop opens at nine and closes at six, Monday to Saturday.\n';

/** Drops files (name -> text) on the element `testId` as a person's drag from the desktop would. */
async function dropFiles(page, testId, files) {
  const transfer = await page.evaluateHandle((entries) => {
    const dt = new DataTransfer();
    for (const [name, text] of entries) dt.items.add(new File([text], name, { type: 'text/plain' }));
    return dt;
  }, Object.entries(files));
  const zone = byTestId(page, testId);
  await zone.dispatchEvent('dragover', { dataTransfer: transfer });
  await zone.dispatchEvent('drop', { dataTransfer: transfer });
}

/** The row of document `name` once its status is `status` (ingestion is followed live). */
async function documentRow(page, name, status, timeout = 30000) {
  const row = byTestId(page, `document-row-${name}`);
  await page.waitForFunction(([n, s]) => document.querySelector(`[data-testid="document-row-${n}"]`)
    ?.getAttribute('data-status') === s, [name, status], { timeout });
  return row;
}

scenario('a dataset is created, filled through the file chooser with a bad file refused, previewed and hit-tested', async (page) => {
  await byTestId(page, 'nav-knowledge').click();
  await byTestId(page, 'dataset-list-page').waitFor();
  await byTestId(page, 'dataset-new').click();
  await byTestId(page, 'dataset-name').fill('Shop handbook');
  await byTestId(page, 'dataset-description').fill('Returns and shipping rules');
  await byTestId(page, 'dataset-model').selectOption(EMBEDDING_MODEL);
  await byTestId(page, 'dataset-chunk-tokens').fill('128');
  await byTestId(page, 'dataset-overlap-tokens').fill('0');
  await byTestId(page, 'dataset-save').click();
  await byTestId(page, 'dataset-page').waitFor();
  datasetId = await byTestId(page, 'dataset-page').getAttribute('data-dataset');
  assert.equal(await byTestId(page, 'dataset-title').innerText(), 'Shop handbook');
  assert.match(await byTestId(page, 'dataset-summary').innerText(), new RegExp(EMBEDDING_MODEL));

  // three files at once through the file chooser: two good ones and a "PDF" that is text
  const chooser = page.waitForEvent('filechooser');
  await byTestId(page, 'document-choose').click();
  await (await chooser).setFiles([
    { name: 'returns.txt', mimeType: 'text/plain', buffer: Buffer.from(RETURNS_TXT) },
    { name: 'shipping.md', mimeType: 'text/markdown', buffer: Buffer.from(SHIPPING_MD) },
    { name: 'broken.pdf', mimeType: 'application/pdf', buffer: Buffer.from('this is not a PDF at all') },
  ]);
  if (process.env.E2E_SIGNALS) {
    // the embeddings are held: a good file waits in `embedding` (chunks done of total)
    // while the bad one is already refused, then the embeddings go on
    await page.waitForFunction(() => [...document.querySelectorAll('[data-testid^="document-row-"]')]
      .some((row) => row.getAttribute('data-status') === 'embedding'), null, { timeout: 30000 });
    const waiting = page.locator('[data-testid^="document-row-"][data-status="embedding"]').first();
    assert.match(await waiting.locator('[data-testid="document-status"]').innerText(), /^embedding 0\/\d+$/);
    await documentRow(page, 'broken.pdf', 'rejected');
    await shot(page, 'knowledge-progress');
    writeFileSync(join(process.env.E2E_SIGNALS, 'release-embeddings'), 'go');
  }
  const bad = await documentRow(page, 'broken.pdf', 'rejected');
  const reason = await bad.locator('[data-testid="document-error"]').innerText();
  assert.match(reason, /broken\.pdf|PDF/i, reason);
  assert.match(await bad.locator('[data-testid="document-status"]').innerText(), /not added/);
  const returns = await documentRow(page, 'returns.txt', 'ready');
  const shipping = await documentRow(page, 'shipping.md', 'ready');
  assert.equal(await returns.locator('[data-testid="document-status"]').innerText(), 'ready');
  const chunks = Number(await shipping.locator('[data-testid="document-chunks"]').innerText());
  assert.ok(chunks >= 3, `shipping.md split at its headings: ${chunks} chunks`);
  await shot(page, 'knowledge-documents');

  // the chunk preview of the Markdown file: each section its own chunk, with its headings
  await shipping.locator('[data-testid="document-preview"]').click();
  const preview = byTestId(page, 'chunk-preview');
  await preview.waitFor();
  assert.match(await byTestId(page, 'chunk-range').innerText(), new RegExp(`1–${chunks} of ${chunks}`));
  assert.match(await preview.innerText(), /Shipping › Express/);
  assert.match(await preview.innerText(), /Express parcels arrive in two days/);
  await shot(page, 'knowledge-chunks', preview);
  await page.keyboard.press('Escape');

  // hit testing: the Express section comes first, with its score and source
  await byTestId(page, 'dataset-tab-hits').click();
  await byTestId(page, 'hit-query').fill('How long do express parcels take?');
  await byTestId(page, 'hit-mode').selectOption('hybrid');
  await byTestId(page, 'hit-top-k').fill('3');
  await byTestId(page, 'hit-search').click();
  const first = byTestId(page, 'hit-0');
  await first.waitFor();
  assert.equal(await first.locator('[data-testid="hit-source"]').innerText(), 'shipping.md');
  assert.match(await first.locator('[data-testid="hit-text"]').innerText(), /Express parcels arrive in two days/);
  assert.match(await first.locator('[data-testid="hit-score"]').innerText(), /^\d\.\d{3}$/);
  await shot(page, 'knowledge-hit-testing');

  // the list shows the counts; a second dataset is edited, then deleted after confirming
  await byTestId(page, 'dataset-back').click();
  await byTestId(page, `dataset-${datasetId}`).waitFor();
  // the list shows what it held until its reload (made on opening it) answers
  await page.waitForFunction((id) => /2 documents/.test(
    document.querySelector(`[data-testid="dataset-${id}"]`)?.textContent ?? ''), datasetId, { timeout: 15000 });
  assert.match(await byTestId(page, `dataset-${datasetId}`).innerText(), /2 documents/);
  await byTestId(page, 'dataset-new').click();
  await byTestId(page, 'dataset-name').fill('Scratch');
  await byTestId(page, 'dataset-save').click();
  await byTestId(page, 'dataset-page').waitFor();
  const scratch = await byTestId(page, 'dataset-page').getAttribute('data-dataset');
  assert.match(await byTestId(page, 'dataset-summary').innerText(), /full-text search only/);
  // two files dropped at once (one empty: refused, the other kept), and a text added
  await dropFiles(page, 'upload-zone', { 'notes.txt': 'Staff meet on Mondays.', 'blank.txt': '' });
  assert.match(await (await documentRow(page, 'blank.txt', 'rejected')).innerText(), /no text found/);
  await documentRow(page, 'notes.txt', 'ready');
  await byTestId(page, 'add-text').locator('summary').click();
  await byTestId(page, 'add-text-name').fill('memo.md');
  await byTestId(page, 'add-text-body').fill('# Memo\n\nThe stock count is on Friday.');
  await byTestId(page, 'add-text-submit').click();
  await documentRow(page, 'memo.md', 'ready');
  // the Chinese UI names the statuses in Chinese
  await byTestId(page, 'language-select').selectOption('zh-CN');
  assert.equal(await byTestId(page, 'document-row-memo.md').locator('[data-testid="document-status"]').innerText(), '可用');
  assert.equal(await byTestId(page, 'dataset-tab-hits').innerText(), '召回测试');
  await byTestId(page, 'language-select').selectOption('en');
  await byTestId(page, 'dataset-edit').click();
  await byTestId(page, 'dataset-name').fill('Scratch notes');
  await byTestId(page, 'dataset-save').click();
  await page.locator('[data-testid="dataset-title"]', { hasText: 'Scratch notes' }).waitFor();
  await byTestId(page, 'dataset-back').click();
  await byTestId(page, `dataset-delete-${scratch}`).click();
  assert.match(await byTestId(page, 'dataset-delete-dialog').innerText(), /cannot be undone/);
  await byTestId(page, 'dataset-delete-confirm').click();
  await byTestId(page, `dataset-${scratch}`).waitFor({ state: 'detached' });
  assert.deepEqual((await apiCall('GET', '/v1/datasets')).datasets.map((d) => d.name), ['Shop handbook']);
});

scenario('the retrieval node picks the dataset by name and the chat preview cites the chunk it answered from', async (page) => {
  assert.ok(datasetId, 'the first scenario created the dataset');
  await apiCall('POST', '/v1/workflows', {
    id: FLOW, name: 'Handbook chat',
    nodes: [
      { id: 'start', type: 'start', position: { x: 0, y: 0 } },
      { id: 'search', type: 'knowledge_retrieval', name: 'Search the handbook', position: { x: 260, y: 0 },
        config: { top_k: 2, mode: 'hybrid' } },
      { id: 'reply', type: 'chat', name: 'Answer', position: { x: 520, y: 0 },
        config: { model: 'default', quote: { ref: 'search.quote' } } },
      { id: 'say', type: 'answer', position: { x: 780, y: 0 }, config: { text: '{{ reply.answer }}' } },
    ],
    edges: [{ id: 'e1', source: 'start', target: 'search' }, { id: 'e2', source: 'search', target: 'reply' },
      { id: 'e3', source: 'reply', target: 'say' }],
  });
  await openWorkflow(page, FLOW);
  await byTestId(page, 'node-title-search').click();
  const picker = byTestId(page, 'config-datasets');
  await picker.waitFor();
  const option = byTestId(page, `config-datasets-option-${datasetId}`);
  assert.match(await option.innerText(), /Shop handbook/);  // the name, not the id
  await option.locator('input').check();
  await waitDraft(FLOW, (d) => JSON.stringify(d.nodes.find((n) => n.id === 'search').config.datasets) === JSON.stringify([datasetId]));
  await shot(page, 'knowledge-picker', byTestId(page, 'config-panel'));

  await byTestId(page, 'run-button').click();
  await byTestId(page, 'run-panel').waitFor();
  await byTestId(page, 'run-tab-chat').click();
  await byTestId(page, 'chat-input').fill('How long do express parcels take?');
  await byTestId(page, 'chat-send').click();
  const reply = page.locator('[data-testid="chat-message-assistant"]', { hasText: '[1]' });
  await reply.waitFor({ timeout: 30000 });
  assert.match(await reply.locator('.chat-text').innerText(), /Express parcels arrive in two days/);
  const citation = reply.locator('[data-testid="chat-citations-1"]');
  await citation.waitFor();
  assert.equal(await citation.locator('[data-testid="citation-source"]').innerText(), 'shipping.md');
  assert.ok(!(await citation.locator('[data-testid="citation-text"]').isVisible()), 'the quote opens on demand');
  await citation.locator('summary').click();
  assert.match(await citation.locator('[data-testid="citation-text"]').innerText(), /Express parcels arrive in two days/);
  await shot(page, 'knowledge-chat-citation', byTestId(page, 'run-panel'));

  // the trace shows what the search found, readably
  await byTestId(page, 'trace-node-search').locator('summary').click();
  const found = byTestId(page, 'trace-chunks-search');
  await found.waitFor();
  assert.match(await found.innerText(), /Chunks found \(\d\)/);
  assert.equal(await found.locator('[data-testid="trace-chunks-search-1"] [data-testid="citation-source"]').innerText(),
    'shipping.md');
  assert.match(await found.locator('[data-testid="trace-chunks-search-1"] [data-testid="citation-text"]').innerText(),
    /Express parcels arrive in two days/);  // the quote itself, shown in full
  await byTestId(page, 'trace-node-reply').locator('summary').click();
  assert.match(await byTestId(page, 'trace-citations-reply').innerText(), /\[1\] shipping\.md/);
  await shot(page, 'knowledge-trace', found);
});
