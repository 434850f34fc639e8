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
    const e = { seq, occurredAt: at(seq), type: 'task.created', prevHash: prev, body };
    const hash = eventHash(e);
    full.push({ ...e, hash });
    events.push(
      tenant === 'globex'
        ? { seq, prevHash: prev, hash, redacted: true }
        : { ...e, hash, selected: seq % 2 === 1 },
    );
    prev = hash;
  }
  const signed = full[(options.checkpointAt ?? count) - 1]!;
  const checkpoint = await signCheckpoint(signed, key, new Date('2026-03-10T00:00:00Z'));
  return {
    format: BUNDLE_FORMAT,
    createdAt: '2026-03-10T00:00:00.000Z',
    selection: { kind: 'task' as const, taskId: 't1', tenant: 'acme' },
    period: { from: at(1), to: at(count) },
    range: { firstSeq: 1, lastSeq: count },
    checkpoint: { jws: checkpoint.jws },
    events,
  };
}

const keys = () => ({ keys: [key.publicJwk] });

test('an intact bundle verifies, counting selected, recomputed and redacted events', async () => {
  const r = await verifyBundle(await bundle(5, { redact: [2] }), keys());
  expect(r).toMatchObject({ ok: true, selected: 3, recomputed: 4, redacted: 1 });
  expect(r.checkpoint).toMatchObject({ seq: 5, keyId: key.keyId });
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
