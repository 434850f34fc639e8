import { newEventKey } from '../src/event-key.ts';

test('event keys are UUIDv7: version 7, RFC variant, ordered by their time', () => {
  const a = newEventKey(1_700_000_000_000);
  const b = newEventKey(1_700_000_000_001);
  for (const k of [a, b])
    expect(k).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  expect(a < b).toBe(true);
  expect(a.slice(0, 13)).toBe('018bcfe5-6800');
  expect(newEventKey()).not.toBe(newEventKey());
});
