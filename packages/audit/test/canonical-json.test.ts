import { canonicalJson } from '../src/index.ts';

test('object keys are sorted by UTF-16 code units at every level, with no whitespace', () => {
  expect(canonicalJson({ b: 1, a: { d: [3, { z: 1, y: 2 }], c: 'x' }, B: true })).toBe(
    '{"B":true,"a":{"c":"x","d":[3,{"y":2,"z":1}]},"b":1}',
  );
  // U+00E9 (é) sorts before U+1F600 (a surrogate pair starting 0xD83D) and after "z".
  expect(canonicalJson({ '😀': 1, é: 2, z: 3 })).toBe('{"z":3,"é":2,"😀":1}');
});

test('undefined members are dropped; undefined in arrays becomes null', () => {
  expect(canonicalJson({ a: undefined, b: [undefined, 1] })).toBe('{"b":[null,1]}');
});

test('strings and numbers take JSON.stringify’s forms; non-ASCII stays as UTF-8 text', () => {
  expect(canonicalJson({ s: 'Zoë – "q"\n\u0001', n: 1e21, f: 0.1, i: -0 })).toBe(
    '{"f":0.1,"i":0,"n":1e+21,"s":"Zoë – \\"q\\"\\n\\u0001"}',
  );
  expect(canonicalJson({ d: new Date('2026-11-29T19:41:28.123Z') })).toBe(
    '{"d":"2026-11-29T19:41:28.123Z"}',
  );
});

test('a non-finite number is a caller mistake', () => {
  expect(() => canonicalJson({ n: Number.NaN })).toThrow(TypeError);
  expect(() => canonicalJson({ n: Infinity })).toThrow(TypeError);
});
