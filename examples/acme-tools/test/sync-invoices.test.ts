import { createToolHarness, recordingTarget, type ToolHarness } from '@mtg/tool-harness';
import pack from '../src/index.ts';

// The pack's tools run on a real PostgreSQL with the real runner; only the CRM and the
// ledger are stand-ins that record what the tool sent them.
const crm = recordingTarget('crm');
const ledger = recordingTarget('ledger');
let harness: ToolHarness;

beforeAll(async () => {
  harness = await createToolHarness({
    pack,
    env: { ACME_INVOICE_DELAY_MS: '20' },
    targets: { crm, ledger },
  });
});
afterAll(async () => {
  await harness?.close();
});

test('a sync writes each invoice to the ledger once and opens and closes it in the CRM', async () => {
  const { id } = await harness.start('acme_sync_invoices', { account: 'ACME-1', invoices: 3 });
  expect(await harness.run(id)).toBe('settled');

  const task = await harness.task(id);
  expect(task.status).toBe('completed');
  expect(task.result?.structuredContent).toEqual({
    account: 'ACME-1',
    invoices: 3,
    currency: 'EUR',
  });
  expect(task.progress).toEqual({ current: 3, total: 3 });
  expect(task.steps).toEqual([
    'crm:open-sync',
    'ledger:invoice:1',
    'ledger:invoice:2',
    'ledger:invoice:3',
    'crm:close-sync',
  ]);
  expect(crm.writes(id).map((w) => w.path)).toEqual([
    '/api/crm/accounts/ACME-1/syncs',
    '/api/crm/accounts/ACME-1/syncs/close',
  ]);
  expect(ledger.writes(id)).toHaveLength(3);
});

test('a crash after two steps resumes at the third: no finished step runs again, no write lands twice', async () => {
  const { id } = await harness.start('acme_sync_invoices', { account: 'ACME-2', invoices: 4 });
  expect(await harness.run(id, { crashAfterSteps: 2 })).toBe('crashed');
  expect((await harness.task(id)).steps).toEqual(['crm:open-sync', 'ledger:invoice:1']);

  expect(await harness.run(id)).toBe('settled');
  expect((await harness.task(id)).status).toBe('completed');
  expect(Object.entries(harness.stepRuns(id)).filter(([, runs]) => runs !== 1)).toEqual([]);
  expect(crm.repeatedWrites(id)).toEqual([]);
  expect(ledger.repeatedWrites(id)).toEqual([]);
  expect(ledger.writes(id).map((w) => w.body?.number)).toEqual([1, 2, 3, 4]);
  // The second run started where the first stopped.
  expect(
    ledger
      .writes(id)
      .filter((w) => w.run === 2)
      .map((w) => w.body?.number),
  ).toEqual([2, 3, 4]);
});

test('a cancel while an invoice is being written stops the task; nothing is written after it', async () => {
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  let reached!: () => void;
  const atSecond = new Promise<void>((r) => (reached = r));
  ledger.respond(async (call) => {
    if (call.body?.number === 2) {
      reached();
      await gate;
    }
    return { ok: true };
  });
  try {
    const { id } = await harness.start('acme_sync_invoices', { account: 'ACME-3', invoices: 5 });
    const running = harness.run(id);
    await atSecond;
    const cancelling = harness.cancel(id);
    release();
    const view = await cancelling;
    expect(view.status).toBe('cancelled');
    expect(await running).toBe('settled');
    const after = ledger.writes(id).length;
    expect(after).toBeLessThanOrEqual(2);
    expect((await harness.task(id)).status).toBe('cancelled');
    expect(crm.writes(id).map((w) => w.path)).toEqual(['/api/crm/accounts/ACME-3/syncs']);
  } finally {
    ledger.respond(() => ({ ok: true }));
  }
});

test('a task past its deadline is stopped with the reason', async () => {
  const { id } = await harness.start(
    'acme_sync_invoices',
    { account: 'ACME-4', invoices: 50 },
    { deadlineMs: 300 },
  );
  expect(await harness.run(id)).toBe('settled');
  const task = await harness.task(id);
  expect(task.status).toBe('failed');
  expect(task.outcome).toBe('deadline');
  expect(task.statusMessage).toMatch(/Deadline exceeded/);
  expect(ledger.writes(id).length).toBeLessThan(50);
});

test("an unknown item is the tool's own error, with its code", async () => {
  const quoted = await harness.call('acme_quote_price', { sku: 'WIDGET', quantity: 4 });
  expect(quoted.structuredContent).toEqual({
    sku: 'WIDGET',
    quantity: 4,
    total: 10,
    currency: 'EUR',
  });

  const refused = await harness.call('acme_quote_price', { sku: 'SPROCKET', quantity: 1 });
  expect(refused.isError).toBe(true);
  expect(refused.content).toEqual([{ type: 'text', text: expect.stringContaining('SPROCKET') }]);
  expect(refused._meta).toEqual({ 'io.mcp-task-gateway/tool-error': { code: 'unknown_sku' } });
});
