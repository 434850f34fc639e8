import { expect, test } from '@jest/globals';
import { rememberAccepted } from '../src/index.ts';

// A check whose calls are counted; it accepts inputs starting with "ok" until `exp` (ms).
function counted(exp: number) {
  const calls: string[] = [];
  const check = async (input: string) => {
    calls.push(input);
    return input.startsWith('ok') ? { ok: true as const, exp } : { ok: false as const };
  };
  return { calls, check };
}
const acceptedUntil = (v: { ok: boolean; exp?: number }) => (v.ok ? v.exp : undefined);

test('an accepted input is checked once while remembered; a refused one every time', async () => {
  const clock = { ms: 1_000 };
  const { calls, check } = counted(100_000);
  const remembered = rememberAccepted(check, {
    maxAgeMs: 60_000,
    acceptedUntil,
    now: () => clock.ms,
  });
  expect(await remembered('ok-a')).toEqual({ ok: true, exp: 100_000 });
  expect(await remembered('ok-a')).toEqual({ ok: true, exp: 100_000 });
  expect(await remembered('bad')).toEqual({ ok: false });
  expect(await remembered('bad')).toEqual({ ok: false });
  expect(calls).toEqual(['ok-a', 'bad', 'bad']);
});

test('never past maxAgeMs, nor past what acceptedUntil says', async () => {
  const clock = { ms: 0 };
  const { calls, check } = counted(30_000);
  const remembered = rememberAccepted(check, {
    maxAgeMs: 10_000,
    acceptedUntil,
    now: () => clock.ms,
  });
  await remembered('ok-a');
  clock.ms = 9_999;
  await remembered('ok-a');
  expect(calls).toHaveLength(1);
  clock.ms = 10_000; // maxAgeMs after the check: checked again
  await remembered('ok-a');
  expect(calls).toHaveLength(2);
  clock.ms = 29_999;
  await remembered('ok-a');
  expect(calls).toHaveLength(3); // remembered at 10,000 until 20,000: checked again at 29,999
  clock.ms = 30_000; // its own bound reached: checked every time from now on
  await remembered('ok-a');
  await remembered('ok-a');
  expect(calls).toHaveLength(5);
});

test('the oldest is forgotten past maxEntries; maxAgeMs 0 remembers nothing', async () => {
  const { calls, check } = counted(Number.MAX_SAFE_INTEGER);
  const remembered = rememberAccepted(check, {
    maxAgeMs: 60_000,
    maxEntries: 2,
    acceptedUntil,
  });
  await remembered('ok-1');
  await remembered('ok-2');
  await remembered('ok-3'); // forgets ok-1
  await remembered('ok-3');
  await remembered('ok-2');
  await remembered('ok-1');
  expect(calls).toEqual(['ok-1', 'ok-2', 'ok-3', 'ok-1']);
  const never = counted(Number.MAX_SAFE_INTEGER);
  const unremembered = rememberAccepted(never.check, {
    maxAgeMs: 0,
    acceptedUntil,
  });
  await unremembered('ok-1');
  await unremembered('ok-1');
  expect(never.calls).toEqual(['ok-1', 'ok-1']);
});
