import {
  createChainVerifier,
  eventHash,
  GENESIS_HASH,
  type ChainEvent,
  type ChainVerifierOptions,
} from '../src/index.ts';

/** A valid chain of `n` events, as audit.append() would have written it. */
function chain(n: number): ChainEvent[] {
  const out: ChainEvent[] = [];
  let prev = GENESIS_HASH;
  for (let seq = 1; seq <= n; seq++) {
    const body = JSON.stringify({ data: { n: seq }, subject: 'nia', tenant: 'acme' });
    const e = {
      seq,
      occurredAt: `2026-11-29T10:00:${String(seq % 60).padStart(2, '0')}.000000Z`,
      type: 'task.status_read',
      prevHash: prev,
      body,
    };
    const hash = eventHash(e);
    out.push({
      ...e,
      hash,
      columns: {
        taskId: null,
        tenant: 'acme',
        subject: 'nia',
        client: null,
        tool: null,
        reason: null,
        correlationId: null,
        actorSubject: null,
        actorKind: null,
      },
    });
    prev = hash;
  }
  return out;
}

function run(events: ChainEvent[], options?: ChainVerifierOptions) {
  const v = createChainVerifier(options);
  for (const e of events) {
    const f = v.push(e);
    if (f) return f;
  }
  return v.finish();
}

const rehash = (e: ChainEvent): ChainEvent => ({ ...e, hash: eventHash(e) });

test('an intact chain has no failure and counts its events', () => {
  const v = createChainVerifier();
  for (const e of chain(10)) expect(v.push(e)).toBeUndefined();
  expect(v.finish()).toBeUndefined();
  expect(v.stats).toMatchObject({ events: 10, firstSeq: 1, lastSeq: 10 });
});

test('an empty chain is intact', () => {
  expect(run([])).toBeUndefined();
});

test('each kind of damage is named at its first bad event', () => {
  const c = chain(10);
  expect(
    run(c.map((e) => (e.seq === 4 ? { ...e, body: e.body.replace('nia', 'eve') } : e))),
  ).toMatchObject({ code: 'modified', seq: 4 });
  expect(run(c.filter((e) => e.seq !== 4 && e.seq !== 5))).toMatchObject({
    code: 'missing',
    seq: 4,
    message: expect.stringMatching(/events 4\.\.5 are missing/),
  });
  expect(run(c.slice(2))).toMatchObject({ code: 'missing', seq: 1 });
  const swapped = c.map((e) =>
    e.seq === 6 ? { ...c[6]!, seq: 6 } : e.seq === 7 ? { ...c[5]!, seq: 7 } : e,
  );
  expect(run(swapped)).toMatchObject({ code: 'reordered', seq: 6 });
  const withDuplicate = [...c.slice(0, 5), c[4]!, ...c.slice(5)];
  expect(run(withDuplicate)).toMatchObject({ code: 'inserted', seq: 5 });
  const rewritten = c.map((e) =>
    e.seq === 3 ? rehash({ ...e, body: e.body.replace('"n":3', '"n":33') }) : e,
  );
  expect(run(rewritten)).toMatchObject({ code: 'broken_link', seq: 4 });
  const column = c.map((e) =>
    e.seq === 8 ? { ...e, columns: { ...e.columns, subject: 'eve' } } : e,
  );
  expect(run(column)).toMatchObject({
    code: 'modified',
    seq: 8,
    message: expect.stringMatching(/column subject is "eve", but the hashed body says "nia"/),
  });
});

test('an event slipped in with the later ones renumbered is named as inserted, forged hash or not', () => {
  const c = chain(10);
  const renumbered = c.slice(4).map((e) => ({ ...e, seq: e.seq + 1 }));
  const forged = rehash({
    ...c[4]!,
    body: '{"subject":"mallory"}',
    columns: { ...c[4]!.columns, tenant: null, subject: 'mallory' },
  });
  expect(run([...c.slice(0, 4), forged, ...renumbered])).toMatchObject({
    code: 'inserted',
    seq: 5,
  });
  const clumsy = { ...forged, hash: 'f'.repeat(64) };
  expect(run([...c.slice(0, 4), clumsy, ...renumbered])).toMatchObject({
    code: 'inserted',
    seq: 5,
  });
});

test('checkpoints: a rewritten prefix, a truncated tail, and a start from an anchor', () => {
  const c = chain(10);
  const checkpoints = [
    { seq: 6, hash: c[5]!.hash },
    { seq: 10, hash: c[9]!.hash },
  ];
  expect(run(c, { checkpoints })).toBeUndefined();
  expect(run(c.slice(0, 8), { checkpoints })).toMatchObject({ code: 'truncated', seq: 9 });
  // Rehash everything from event 2 on: a valid chain, but not the one signed.
  let prev = c[0]!.hash;
  const forged = [
    c[0]!,
    ...c.slice(1).map((e) => {
      const f = rehash({ ...e, prevHash: prev, body: e.body.replace('acme', 'acme') + ' ' });
      prev = f.hash;
      return f;
    }),
  ];
  expect(run(forged)).toBeUndefined();
  expect(run(forged, { checkpoints })).toMatchObject({ code: 'checkpoint_mismatch', seq: 6 });

  const anchor = { seq: 6, hash: c[5]!.hash };
  expect(run(c.slice(5), { anchor, checkpoints })).toBeUndefined(); // the anchor's own event still stored
  expect(run(c.slice(6), { anchor, checkpoints })).toBeUndefined(); // archived with the months before
  expect(run(c.slice(5), { anchor: { seq: 6, hash: 'a'.repeat(64) } })).toMatchObject({
    code: 'checkpoint_mismatch',
    seq: 6,
  });
  expect(run(c.slice(7), { anchor })).toMatchObject({ code: 'missing', seq: 7 });
});

test('a start from a checkpoint needs its event, or a successor linking to it once everything before was archived', () => {
  const c = chain(10);
  const anchor = { seq: 10, hash: c[9]!.hash };
  // Events 9..10 deleted: nothing at or after the anchor is left to check.
  expect(run([], { anchor })).toMatchObject({ code: 'truncated', seq: 10 });
  expect(run([], { anchor, olderEventsStored: true })).toMatchObject({
    code: 'truncated',
    seq: 10,
  });
  // The anchor's event deleted, later ones kept: only an archive (nothing older stored) passes.
  const at6 = { seq: 6, hash: c[5]!.hash };
  expect(run(c.slice(6), { anchor: at6 })).toBeUndefined();
  expect(run(c.slice(6), { anchor: at6, olderEventsStored: true })).toMatchObject({
    code: 'missing',
    seq: 6,
  });
  expect(run(c.slice(5), { anchor: at6, olderEventsStored: true })).toBeUndefined();
});
