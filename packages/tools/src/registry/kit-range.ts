/**
 * Just enough of npm's semver ranges to answer "does this range admit that version": `^`, `~`,
 * x-ranges (`0.2.x`, `1`, `*`), comparators (`>=0.1.0 <0.3.0`), hyphen ranges and `||`.
 * Pre-release tags are ignored (kit releases have none). As npm's caret does, the breaking
 * number of a 0.x version is its minor: `^0.2.0` admits 0.2.5, not 0.3.0.
 */

type Version = [number, number, number];
type Comparator = { op: '>=' | '<' | '<=' | '>' | '='; v: Version };

/** The first number that may break: the major, for 0.x the minor, for 0.0.x the patch. */
export function breakingLine(version: string): string | undefined {
  const v = parseVersion(version);
  if (!v) return undefined;
  if (v[0] > 0) return `${v[0]}.x`;
  if (v[1] > 0) return `0.${v[1]}.x`;
  return `0.0.${v[2]}`;
}

/** Whether `range` admits `version`; undefined when `range` is not a semver range. */
export function rangeAdmits(range: string, version: string): boolean | undefined {
  const v = parseVersion(version);
  if (!v) return undefined;
  let any = false;
  for (const alternative of range.split('||')) {
    const comparators = parseAlternative(alternative.trim());
    if (!comparators) return undefined;
    if (comparators.every((c) => holds(v, c))) any = true;
  }
  return any;
}

function parseVersion(text: string): Version | undefined {
  const m = /^v?(\d+)\.(\d+)\.(\d+)(?:[-+].*)?$/.exec(text.trim());
  return m ? [Number(m[1]), Number(m[2]), Number(m[3])] : undefined;
}

/** `1`, `1.2`, `1.2.3`, with `x`/`X`/`*` wildcards: the numbers given (undefined: any). */
function parsePartial(text: string): Array<number | undefined> | undefined {
  const bare = text.replace(/^v/, '').replace(/[-+].*$/, '');
  if (bare === '' || bare === '*' || /^[xX]$/.test(bare)) return [];
  const parts = bare.split('.');
  if (parts.length > 3) return undefined;
  const out: Array<number | undefined> = [];
  for (const p of parts) {
    if (/^[xX*]$/.test(p)) break;
    if (!/^\d+$/.test(p)) return undefined;
    out.push(Number(p));
  }
  return out;
}

function parseAlternative(text: string): Comparator[] | undefined {
  const hyphen = /^(\S+)\s+-\s+(\S+)$/.exec(text);
  if (hyphen) {
    const low = parseAlternative(`>=${hyphen[1]}`);
    const high = parseAlternative(`<=${hyphen[2]}`);
    return low && high ? [...low, ...high] : undefined;
  }
  const out: Comparator[] = [];
  // `>= 1.2.3` is `>=1.2.3`.
  for (const token of text.replace(/(>=|<=|>|<|=|\^|~)\s+/g, '$1').split(/\s+/)) {
    if (!token) continue;
    const m = /^(\^|~|>=|<=|>|<|=)?(.*)$/.exec(token)!;
    const partial = parsePartial(m[2]!);
    if (!partial) return undefined;
    const comparators = desugar(m[1] ?? '', partial);
    if (!comparators) return undefined;
    out.push(...comparators);
  }
  return out;
}

function desugar(op: string, p: Array<number | undefined>): Comparator[] | undefined {
  const [M, m, pa] = p;
  const low: Version = [M ?? 0, m ?? 0, pa ?? 0];
  if (M === undefined) return op === '<' || op === '>' ? [{ op: '<', v: [0, 0, 0] }] : [];
  // The first version past the wildcarded part: 1.2 → 1.3.0, 1 → 2.0.0.
  const next: Version = m === undefined ? [M + 1, 0, 0] : pa === undefined ? [M, m + 1, 0] : low;
  switch (op) {
    case '^': {
      const upper: Version =
        M > 0 || m === undefined
          ? [M + 1, 0, 0]
          : m > 0 || pa === undefined
            ? [0, m + 1, 0]
            : [0, 0, pa + 1];
      return [
        { op: '>=', v: low },
        { op: '<', v: upper },
      ];
    }
    case '~':
      return [
        { op: '>=', v: low },
        { op: '<', v: m === undefined ? [M + 1, 0, 0] : [M, m + 1, 0] },
      ];
    case '>=':
      return [{ op: '>=', v: low }];
    case '<':
      return [{ op: '<', v: low }];
    case '>':
      return pa === undefined ? [{ op: '>=', v: next }] : [{ op: '>', v: low }];
    case '<=':
      return pa === undefined ? [{ op: '<', v: next }] : [{ op: '<=', v: low }];
    case '=':
    case '':
      return pa === undefined
        ? [
            { op: '>=', v: low },
            { op: '<', v: next },
          ]
        : [{ op: '=', v: low }];
    default:
      return undefined;
  }
}

function compare(a: Version, b: Version): number {
  return a[0] - b[0] || a[1] - b[1] || a[2] - b[2];
}

function holds(v: Version, c: Comparator): boolean {
  const d = compare(v, c.v);
  switch (c.op) {
    case '>=':
      return d >= 0;
    case '>':
      return d > 0;
    case '<':
      return d < 0;
    case '<=':
      return d <= 0;
    case '=':
      return d === 0;
  }
}
