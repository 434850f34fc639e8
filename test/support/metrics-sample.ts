/** The series of `name` in a Prometheus text exposition: each one's labels and value. */
function* series(text: string, name: string) {
  for (const line of text.split('\n')) {
    const m = /^([a-z_:]+)\{(.*)\} (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const labels = new Map(
      [...m[2]!.matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((x) => [x[1]!, x[2]!]),
    );
    yield { labels, value: Number(m[3]) };
  }
}

const matches = (have: Map<string, string>, labels: Record<string, string>) =>
  Object.entries(labels).every(([k, v]) => have.get(k) === v);

/** The sum of the series of `name` whose labels include `labels` (any order, others allowed). */
export function sample(
  text: string,
  name: string,
  labels: Record<string, string> = {},
): number | undefined {
  let total: number | undefined;
  for (const s of series(text, name)) if (matches(s.labels, labels)) total = (total ?? 0) + s.value;
  return total;
}

/** As `sample`, summed apart by the value of the label `by` (series without it left out). */
export function sampleBy(
  text: string,
  name: string,
  labels: Record<string, string>,
  by: string,
): Map<string, number> {
  const totals = new Map<string, number>();
  for (const s of series(text, name)) {
    const key = s.labels.get(by);
    if (key !== undefined && matches(s.labels, labels))
      totals.set(key, (totals.get(key) ?? 0) + s.value);
  }
  return totals;
}
