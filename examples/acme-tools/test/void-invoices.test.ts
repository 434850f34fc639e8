import { createToolHarness, recordingTarget, type ToolHarness } from '@mtg/tool-harness';
import pack from '../src/index.ts';

// A conversation: the tool asks, the test answers as the caller would, a second person
// approves; and the worker dies right after the answer, which is never asked again.
const crm = recordingTarget('crm');
const ledger = recordingTarget('ledger');
let harness: ToolHarness;

beforeAll(async () => {
  harness = await createToolHarness({ pack, targets: { crm, ledger } });
});
afterAll(async () => {
  await harness?.close();
});

test('the caller confirms, the task voids the invoices once', async () => {
  const { id } = await harness.start('acme_void_invoices', { account: 'ACME-7', invoices: 3 });
  expect(await harness.run(id)).toBe('paused');
  expect((await harness.task(id)).input?.message).toMatch(/Void 3 open invoices of ACME-7/);

  const answered = await harness.answer(id, {
    action: 'accept',
    content: { confirm: true, reason: 'duplicates from the March import' },
  });
  expect(answered.ok).toBe(true);
  expect(await harness.run(id)).toBe('settled');
  expect((await harness.task(id)).result?.structuredContent).toEqual({
    account: 'ACME-7',
    voided: 3,
  });
  expect(ledger.writes(id)).toHaveLength(1);
});

test('an answer that does not fit the form is refused, and the task keeps waiting', async () => {
  const { id } = await harness.start('acme_void_invoices', { account: 'ACME-8', invoices: 2 });
  await harness.run(id);
  const refused = await harness.answer(id, { action: 'accept', content: { confirm: true } });
  expect(refused).toMatchObject({
    ok: false,
    message: expect.stringMatching(/reason is required/),
  });
  expect((await harness.task(id)).status).toBe('input_required');
});

test('a crash right after the answer resumes without asking again; a large void waits for a second person', async () => {
  const { id } = await harness.start('acme_void_invoices', { account: 'ACME-9', invoices: 40 });
  await harness.run(id);
  await harness.answer(id, {
    action: 'accept',
    content: { confirm: true, reason: 'closed account' },
  });
  // The worker dies as the run resumes with the answer: it is in the journal already.
  expect(await harness.run(id, { crashAfterSteps: 0 })).toBe('crashed');
  expect(await harness.run(id)).toBe('paused');
  expect((await harness.task(id)).inputFrom).toBe('approver');

  // The requester may not approve their own void; another person may.
  expect(await harness.decide(id, { approved: true }, { subject: 'alice' })).toMatchObject({
    ok: false,
    code: 'approval_refused',
  });
  expect(await harness.decide(id, { approved: true }, { subject: 'bob' })).toEqual({ ok: true });
  expect(await harness.run(id)).toBe('settled');
  expect((await harness.task(id)).steps).toEqual(['ask:1', 'approval:1', 'ledger:void']);
  expect(ledger.writes(id)).toHaveLength(1);
});
