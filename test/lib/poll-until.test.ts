import { pollUntil, pollUntilOrLast, PollTimeoutError } from '../../scripts/lib/poll-until.ts';

test('a wait that ends returns the value that ended it', async () => {
  let n = 0;
  await expect(
    pollUntil(
      async () => ++n,
      (v) => v >= 3,
      1000,
      1,
    ),
  ).resolves.toBe(3);
});

test('a wait that times out throws, naming what it waited for and the last value', async () => {
  let n = 0;
  const wait = pollUntil(
    async () => ({ writes: ++n }),
    () => false,
    50,
    5,
    'two downstream writes',
  );
  await expect(wait).rejects.toBeInstanceOf(PollTimeoutError);
  await expect(wait).rejects.toMatchObject({
    code: 'poll_timeout',
    what: 'two downstream writes',
    timeoutMs: 50,
    last: { writes: n },
  });
  await expect(wait).rejects.toThrow(
    /^timed out after 50 ms waiting for two downstream writes; last value: \{ writes: \d+ \}$/,
  );
});

test('unnamed, the timeout names the predicate', async () => {
  await expect(
    pollUntil(
      async () => [],
      (w) => w.length >= 2,
      20,
      5,
    ),
  ).rejects.toThrow(/waiting for `\(w\) ?=> ?w\.length >= 2`; last value: \[\]$/);
});

test('the explicit value-or-timeout variant says whether the wait ended', async () => {
  await expect(
    pollUntilOrLast(
      async () => 1,
      (v) => v === 2,
      20,
      5,
    ),
  ).resolves.toEqual({
    done: false,
    value: 1,
  });
  await expect(
    pollUntilOrLast(
      async () => 2,
      (v) => v === 2,
      20,
      5,
    ),
  ).resolves.toEqual({
    done: true,
    value: 2,
  });
});
