/** One Prometheus sample: `name{label="v",…} value`. */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

/** The samples of a Prometheus text exposition (comments and unparsable lines skipped). */
export function parsePrometheusText(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = LINE.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[3] ?? '').matchAll(LABEL)) {
      labels[l[1]!] = l[2]!.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
    }
    const value = Number(m[4]);
    if (!Number.isNaN(value)) samples.push({ name: m[1]!, labels, value });
  }
  return samples;
}

export interface Endpoint {
  name: string;
  url: string;
}

export type EndpointReading =
  | { endpoint: Endpoint; ok: true; samples: Sample[] }
  | { endpoint: Endpoint; ok: false; error: string };

/** Scrapes each endpoint once (2 s each, in parallel); an unreachable one says why. */
export async function readMetrics(
  endpoints: readonly Endpoint[],
  options: { token?: string; fetch?: typeof fetch } = {},
): Promise<EndpointReading[]> {
  const doFetch = options.fetch ?? fetch;
  return Promise.all(
    endpoints.map(async (endpoint): Promise<EndpointReading> => {
      try {
        const r = await doFetch(endpoint.url, {
          headers: options.token ? { authorization: `Bearer ${options.token}` } : {},
          signal: AbortSignal.timeout(2000),
        });
        if (!r.ok) return { endpoint, ok: false, error: `HTTP ${r.status}` };
        return { endpoint, ok: true, samples: parsePrometheusText(await r.text()) };
      } catch (error) {
        return { endpoint, ok: false, error: (error as Error).message };
      }
    }),
  );
}
