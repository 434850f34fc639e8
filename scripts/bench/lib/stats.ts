/** Small statistics over samples (milliseconds, rates). */

export function percentile(values: number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  // Nearest-rank: the smallest value with at least p% of the samples at or below it.
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[Math.min(rank, sorted.length) - 1]!;
}

export const median = (values: number[]) => percentile(values, 50);

export function round(value: number, digits = 0): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

/** "1,234" / "12.3" for tables. */
export function fmt(value: number | undefined, digits = 0): string {
  if (value === undefined || Number.isNaN(value)) return 'n/a';
  return value.toLocaleString('en-US', {
    maximumFractionDigits: digits,
    minimumFractionDigits: digits,
  });
}

/** "12.3 (10.1–14.0)": the median of the runs with their spread (min–max). */
export const medianSpread = (values: number[], digits = 0) =>
  `${fmt(median(values), digits)} (${fmt(Math.min(...values), digits)}–${fmt(Math.max(...values), digits)})`;

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
