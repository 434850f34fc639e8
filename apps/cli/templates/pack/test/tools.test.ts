import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { createToolHarness, recordingTarget, type ToolHarness } from '@mtg/tool-harness';
import pack from '../src/index.ts';

// The tools run on a real PostgreSQL (an embedded one when DATABASE_URL is unset) with the
// gateway's real runner; only the downstream system is a stand-in that records what it got.
const downstream = recordingTarget('downstream');
let harness: ToolHarness;

before(async () => {
  harness = await createToolHarness({
    pack,
    env: { NOTES_BATCH_PAUSE_MS: '0' },
    targets: { downstream },
  });
});
after(async () => {
  await harness?.close();
});

test('count_words counts the words of a text', async () => {
  const result = await harness.call('count_words', { text: 'one two  three' });
  assert.deepEqual(result.structuredContent, { words: 3 });
});

test('import_notes writes each batch once', async () => {
  const { id } = await harness.start('import_notes', { notebook: 'ideas', batches: 3 });
  assert.equal(await harness.run(id), 'settled');
  const task = await harness.task(id);
  assert.equal(task.status, 'completed');
  assert.deepEqual(task.result?.structuredContent, { notebook: 'ideas', batches: 3 });
  assert.deepEqual(task.steps, ['batch:1', 'batch:2', 'batch:3']);
  assert.equal(downstream.writes(id).length, 3);
});

test('a crash after a batch resumes at the next one: no batch is written twice', async () => {
  const { id } = await harness.start('import_notes', { notebook: 'journal', batches: 3 });
  assert.equal(await harness.run(id, { crashAfterSteps: 1 }), 'crashed');
  assert.equal(await harness.run(id), 'settled');
  assert.deepEqual(downstream.repeatedWrites(id), []);
  assert.deepEqual(
    downstream.writes(id).map((w) => w.path),
    [1, 2, 3].map((b) => '/api/notebooks/journal/batches'),
  );
});
