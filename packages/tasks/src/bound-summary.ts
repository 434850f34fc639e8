/**
 * The bounds of an argument summary, whatever the tool's summarize() returns: the summary is
 * written into the undeletable audit chain (`task.created`) and into every listing, so one
 * call must not be able to write a megabyte there.
 */
export const SUMMARY_LIMITS = {
  /** Members of one object; the rest are counted under the key "…". */
  maxKeys: 32,
  /** Characters of a member name; a longer one is cut and ends in "…". */
  maxKeyChars: 64,
  /** Characters of a string value; a longer one is cut and ends in "…". */
  maxStringChars: 256,
  /** Items of one array; the rest are counted in a last item "… N more". */
  maxItems: 50,
  /** Nesting; a deeper object or array becomes "…". */
  maxDepth: 4,
  /** UTF-8 bytes of the whole summary as JSON; trailing members are dropped to fit. */
  maxBytes: 4096,
} as const;

const MORE = '…';

/**
 * Applies SUMMARY_LIMITS to a tool's summary. A summary within them is returned as it is (as
 * JSON would write it); one past them is cut where it exceeds, visibly (the "…" markers), so
 * an auditor can tell a shortened summary from the tool's own.
 */
export function boundSummary(summary: Record<string, unknown>): Record<string, unknown> {
  const plain = JSON.parse(JSON.stringify(summary) ?? '{}') as unknown;
  // Filled in order: once the bytes are spent, the rest is counted, not written.
  const budget = { left: SUMMARY_LIMITS.maxBytes - RESERVE };
  const bounded = boundValue(plain, 1, budget);
  const top: Record<string, unknown> =
    bounded && typeof bounded === 'object' && !Array.isArray(bounded)
      ? (bounded as Record<string, unknown>)
      : { value: bounded };
  return fitBytes(top);
}

/** Bytes kept back from the walk for the markers and punctuation it adds. */
const RESERVE = 512;

function boundValue(v: unknown, depth: number, budget: { left: number }): unknown {
  if (v === null || typeof v !== 'object') {
    const value = typeof v === 'string' ? cut(v, SUMMARY_LIMITS.maxStringChars) : v;
    budget.left -= Buffer.byteLength(JSON.stringify(value) ?? 'null') + 1;
    return value;
  }
  if (depth > SUMMARY_LIMITS.maxDepth) {
    budget.left -= 6;
    return MORE;
  }
  budget.left -= 2;
  if (Array.isArray(v)) {
    const kept: unknown[] = [];
    for (const x of v) {
      if (kept.length === SUMMARY_LIMITS.maxItems || budget.left <= 0) break;
      kept.push(boundValue(x, depth + 1, budget));
    }
    if (v.length > kept.length) kept.push(`${MORE} ${v.length - kept.length} more`);
    return kept;
  }
  const out: Record<string, unknown> = {};
  const entries = Object.entries(v as Record<string, unknown>);
  let kept = 0;
  for (const [key, value] of entries) {
    if (kept === SUMMARY_LIMITS.maxKeys || budget.left <= 0) break;
    const name = cut(key, SUMMARY_LIMITS.maxKeyChars);
    if (Object.hasOwn(out, name)) continue; // two long names cut to the same prefix
    budget.left -= Buffer.byteLength(JSON.stringify(name)) + 1;
    out[name] = boundValue(value, depth + 1, budget);
    kept++;
  }
  if (entries.length > kept) out[MORE] = entries.length - kept;
  return out;
}

/** Drops trailing members until the JSON fits maxBytes, counting them under "…". */
function fitBytes(top: Record<string, unknown>): Record<string, unknown> {
  const size = (o: unknown) => Buffer.byteLength(JSON.stringify(o));
  if (size(top) <= SUMMARY_LIMITS.maxBytes) return top;
  const entries = Object.entries(top).filter(([k]) => k !== MORE);
  let dropped = typeof top[MORE] === 'number' ? top[MORE] : 0;
  while (entries.length > 0) {
    entries.pop();
    dropped++;
    const candidate = { ...Object.fromEntries(entries), [MORE]: dropped };
    if (size(candidate) <= SUMMARY_LIMITS.maxBytes) return candidate;
  }
  return { [MORE]: dropped };
}

function cut(s: string, max: number): string {
  if (s.length <= max) return s;
  let head = s.slice(0, max - 1);
  // Do not leave half of a surrogate pair.
  if (/[\uD800-\uDBFF]$/.test(head)) head = head.slice(0, -1);
  return head + MORE;
}
