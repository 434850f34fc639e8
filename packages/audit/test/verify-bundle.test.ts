// The bundle verifier on in-memory bundles: each failure code at the event it names.
import {
  BUNDLE_FORMAT,
  canonicalJson,
  eventHash,
  GENESIS_HASH,
  generateSigningJwk,
  loadSigningKey,
  signCheckpoint,
  verifyBundle,
  type BundleEvent,
  type SigningKey,
} from '../src/index.ts';

let key: SigningKey;
beforeAll(async () => {
  key = await loadSigningKey(await generateSigningJwk());
});

const at = (n: number) => `2026-03-0${Math.min(9, n)}T10:00:00.${String(n).padStart(6, '0')}Z`;

/** A chain of `count` events; those of tenant `other` redacted; a checkpoint on the last. */
async function bundle(count: number, options: { redact?: number[]; checkpointAt?: number } = {}) {
  const events: BundleEvent[] = [];
  let prev = GENESIS_HASH;
  const full = [];
  for (let seq = 1; seq <= count; seq++) {
    const tenant = options.redact?.includes(seq) ? 'globex' : 'acme';
    const body = canonicalJson({ taskId: seq % 2 ? 't1' : 't2', tenant, subject: 'nia' });
    const e = { chain: 0, seq, occurredAt: at(seq), type: 'task.created', prevHash: prev, body };
    const hash = eventHash(e);
    full.push({ ...e, hash });
    events.push(
      tenant === 'globex'
        ? { chain: 0, seq, prevHash: prev, hash, redacted: true }
        : { ...e, hash, selected: seq % 2 === 1 },
    );
    prev = hash;
  }
  const signed = full[(options.checkpointAt ?? count) - 1]!;
  // Another tenant's chain is covered by the same checkpoint: only its head travels.
  const heads = [
    { chain: 0, seq: signed.seq, hash: signed.hash },
    { chain: 5, seq: 12, hash: 'ab'.repeat(32) },
  ];
  const checkpoint = await signCheckpoint(heads, 0, key, new Date('2026-03-10T00:00:00Z'));
  return {
    format: BUNDLE_FORMAT,
    createdAt: '2026-03-10T00:00:00.000Z',
    selection: { kind: 'task' as const, taskId: 't1', tenant: 'acme' },
    period: { from: at(1), to: at(count) },
    chains: [{ chain: 0, tenant: null, firstSeq: 1, lastSeq: count }],
    checkpoint: { jws: checkpoint.jws, heads },
    events,
  };
}

const keys = () => ({ keys: [key.publicJwk] });

test('an intact bundle verifies, counting selected, recomputed and redacted events', async () => {
  const r = await verifyBundle(await bundle(5, { redact: [2] }), keys());
  expect(r).toMatchObject({ ok: true, selected: 3, recomputed: 4, redacted: 1 });
  expect(r.checkpoint).toMatchObject({ keyId: key.keyId });
  expect(r.checkpoint!.heads).toContainEqual({ chain: 0, seq: 5, hash: expect.any(String) });
});

test('an event claimed for another chain, or the legacy formula, does not match its hash', async () => {
  const b = await bundle(3);
  (b.events[0] as { chain: number }).chain = 5;
  expect((await verifyBundle(b, keys())).failure).toMatchObject({ code: 'modified', seq: 1 });
  const c = await bundle(3);
  (c.events[1] as { legacy?: true }).legacy = true;
  expect((await verifyBundle(c, keys())).failure).toMatchObject({ code: 'modified', seq: 2 });
});

test("a list of heads other than the signed one is refused: another chain's head moved", async () => {
  const b = await bundle(3);
  b.checkpoint.heads[1] = { ...b.checkpoint.heads[1]!, seq: 11 };
  expect((await verifyBundle(b, keys())).failure).toMatchObject({ code: 'bad_checkpoint' });
  expect((await verifyBundle(b, keys())).failure!.message).toMatch(/not the 2 it signed/);
});

test('a gap in the range is missing, at the first absent seq', async () => {
  const b = await bundle(5);
  b.events.splice(2, 1);
  expect((await verifyBundle(b, keys())).failure).toMatchObject({ code: 'missing', seq: 3 });
});

test('a selected event of another task is not_selected', async () => {
  const b = await bundle(4);
  (b.events[1] as { selected: boolean }).selected = true; // event 2 is of task t2
  expect((await verifyBundle(b, keys())).failure).toMatchObject({ code: 'not_selected', seq: 2 });
});

test('a range that stops short of the signed event is a checkpoint_mismatch', async () => {
  const b = await bundle(5, { checkpointAt: 4 });
  expect((await verifyBundle(b, keys())).failure).toMatchObject({
    code: 'checkpoint_mismatch',
    seq: 5,
  });
});

test('no checkpoint, a foreign key, a malformed file', async () => {
  const b = await bundle(3);
  expect((await verifyBundle({ ...b, checkpoint: null }, keys())).failure?.code).toBe(
    'no_checkpoint',
  );
  const other = await loadSigningKey(await generateSigningJwk());
  expect((await verifyBundle(b, { keys: [other.publicJwk] })).failure?.code).toBe('bad_checkpoint');
  const bad = await verifyBundle({ ...b, events: 'x' }, keys());
  expect(bad.failure).toMatchObject({ code: 'malformed' });
  expect(bad.failure!.message).toMatch(/events/);
});
