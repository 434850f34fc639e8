import { boundSummary, SUMMARY_LIMITS } from '../src/bound-summary.ts';

const bytes = (v: unknown) => Buffer.byteLength(JSON.stringify(v));

test('a summary within the bounds is kept as it is', () => {
  const s = { report: 'Q3 – Zoë', rows: 1000, fields: ['a', 'b'], nested: { on: true, at: null } };
  expect(boundSummary(s)).toEqual(s);
});

test('long names and strings are cut visibly, long lists and objects counted', () => {
  const s = boundSummary({
    ['n'.repeat(100)]: 's'.repeat(1000),
    list: Array.from({ length: 80 }, (_, i) => i),
    many: Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`k${i}`, i])),
  });
  expect(s[`${'n'.repeat(63)}…`]).toBe(`${'s'.repeat(255)}…`);
  expect(s.list).toHaveLength(51);
  expect((s.list as unknown[]).at(-1)).toBe('… 30 more');
  expect(Object.keys(s.many as object)).toHaveLength(33);
  expect((s.many as Record<string, unknown>)['…']).toBe(8);
});

test('nesting past the depth limit becomes a marker', () => {
  expect(boundSummary({ a: { b: { c: { d: { e: 1 } } } } })).toEqual({
    a: { b: { c: { d: '…' } } },
  });
});

test('whatever the shape, the whole summary fits the byte bound', () => {
  const wide = Object.fromEntries(
    Array.from({ length: 32 }, (_, i) => [
      `f${i}`,
      Object.fromEntries(Array.from({ length: 32 }, (_, j) => [`g${j}`, '🚀'.repeat(200)])),
    ]),
  );
  for (const s of [
    wide,
    { patchFields: Array.from({ length: 50 }, (_, i) => `${i}${'k'.repeat(19_000)}`) },
    { one: [[[['x'.repeat(10_000)]]]] },
  ]) {
    const b = boundSummary(s);
    expect(bytes(b)).toBeLessThanOrEqual(SUMMARY_LIMITS.maxBytes);
    expect(bytes(b)).toBeGreaterThan(10);
  }
  const w = boundSummary(wide);
  expect(w['…']).toBeGreaterThan(0);
  // No half of a surrogate pair where a string was cut.
  expect(JSON.stringify(w)).not.toMatch(/\\ud83d(?!\\ude80)/);
});
