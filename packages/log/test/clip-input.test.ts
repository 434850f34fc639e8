import { clipInput, MAX_ECHOED_CHARS } from '../src/index.ts';

const JWT = 'eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJl';

test('a value within the limit is kept whole', () => {
  expect(clipInput('a'.repeat(MAX_ECHOED_CHARS))).toBe('a'.repeat(MAX_ECHOED_CHARS));
});

test('a longer value is cut at the limit with a marker counting the dropped characters', () => {
  expect(clipInput('a'.repeat(10_000))).toBe(`${'a'.repeat(200)}…(+9800 chars)`);
  expect(clipInput('abcdef', 3)).toBe('abc…(+3 chars)');
});

test('a cut never keeps half of a surrogate pair', () => {
  expect(clipInput(`ab😀cd`, 3)).toBe('ab…(+4 chars)');
});

test('a token is redacted before the cut, so no part of it survives', () => {
  expect(clipInput(`${'x'.repeat(190)}${JWT}`)).toBe(`${'x'.repeat(190)}[jwt]`);
});
