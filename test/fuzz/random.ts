// Seeded randomness for the fuzz harness: the same seed replays the same requests.

export type Rng = () => number;

/** mulberry32: small, fast, and good enough to pick mutations. */
export function seeded(seed: number): Rng {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export const int = (rng: Rng, max: number) => Math.floor(rng() * max);
export const pick = <T>(rng: Rng, items: readonly T[]): T => items[int(rng, items.length)]!;

/** Strings that break naive handling of text: encodings, controls, direction, size. */
export const NASTY_STRINGS: readonly string[] = [
  '',
  '\u0000',
  'a\u0000b',
  '\ud800', // lone high surrogate
  '\udc00', // lone low surrogate
  'x\udbff\udfffy', // the last code point, as a pair
  '\ud83d\ude00', // 4-byte emoji
  '👩‍👩‍👧‍👦', // ZWJ sequence
  '\u202eevil\u202c', // right-to-left override
  '\u200b\u200c\u200d\u2060', // zero-width characters
  '\ufeffbom',
  '\uffff\ufffe', // noncharacters
  '\ue000', // private use
  'e\u0301'.repeat(1000), // combining marks
  'ﷺ'.repeat(100),
  '\t\r\n\u000b\u000c\u0085\u2028\u2029',
  '%00%ff%2e%2e%2f',
  '../../../../etc/passwd',
  "' OR '1'='1'; DROP TABLE app.tasks; --",
  '${jndi:ldap://x}',
  '{{7*7}}',
  '<script>alert(1)</script>',
  '__proto__',
  'constructor',
  'A'.repeat(70_000),
  '😀'.repeat(20_000),
];

/** A random JSON value of bounded size and depth. */
export function randomJson(rng: Rng, depth = 0): unknown {
  const r = rng();
  if (depth > 4 || r < 0.45) {
    return pick(rng, [
      null,
      true,
      false,
      0,
      -1,
      1.5,
      1e308,
      -1e-308,
      Number.MAX_SAFE_INTEGER,
      2 ** 64,
      pick(rng, NASTY_STRINGS),
      'x',
      '2.0',
      '',
      [],
      {},
    ] as unknown[]);
  }
  if (r < 0.7) return Array.from({ length: int(rng, 4) }, () => randomJson(rng, depth + 1));
  const o: Record<string, unknown> = {};
  for (let i = 0; i < int(rng, 4); i++)
    o[
      pick(rng, [
        'a',
        'name',
        'taskId',
        'arguments',
        '__proto__',
        pick(rng, NASTY_STRINGS).slice(0, 40),
      ])
    ] = randomJson(rng, depth + 1);
  return o;
}

/** Replaces, removes or retypes one value somewhere in `value` (a deep copy is returned). */
export function mutateJson(rng: Rng, value: unknown): unknown {
  const copy = JSON.parse(JSON.stringify(value)) as unknown;
  const paths: Array<{ parent: Record<string, unknown> | unknown[]; key: string | number }> = [];
  const walk = (v: unknown) => {
    if (v && typeof v === 'object') {
      for (const [k, child] of Object.entries(v)) {
        paths.push({ parent: v as Record<string, unknown>, key: Array.isArray(v) ? Number(k) : k });
        walk(child);
      }
    }
  };
  walk(copy);
  if (paths.length === 0) return randomJson(rng);
  const { parent, key } = pick(rng, paths);
  const action = rng();
  if (action < 0.25) {
    if (Array.isArray(parent)) parent.splice(key as number, 1);
    else delete parent[key as string];
  } else if (action < 0.8) {
    (parent as Record<string, unknown>)[key as string] = randomJson(rng);
  } else {
    (parent as Record<string, unknown>)[key as string] = pick(rng, NASTY_STRINGS);
  }
  return copy;
}

/** Byte-level damage to a serialized body. */
export function mutateBytes(rng: Rng, text: string): Buffer {
  const bytes = Buffer.from(text, 'utf8');
  const out = Buffer.from(bytes);
  const action = rng();
  if (action < 0.3) return out.subarray(0, int(rng, out.length)); // truncated
  if (action < 0.6) {
    for (let i = 0; i < 1 + int(rng, 4); i++) out[int(rng, out.length)] = int(rng, 256);
    return out;
  }
  if (action < 0.8) {
    const at = int(rng, out.length);
    return Buffer.concat([
      out.subarray(0, at),
      Buffer.from([0xc0, 0x80, 0xed, 0xa0, 0x80, 0xff]),
      out.subarray(at),
    ]);
  }
  return Buffer.concat([out, Buffer.from(pick(rng, ['}', ']', ',', '\u0000', ' garbage', '{}']))]);
}
