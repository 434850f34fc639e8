// The load generator, run as its own process (scripts/bench/lib/load-client.ts forks it):
// autocannon against one or more URLs, each request built by a scenario (distinct
// arguments per start, a rotating token and task id per poll). Prints one JSON line.
import { readFileSync } from 'node:fs';
import autocannon from 'autocannon';
import { body2026, headers2026 } from './lib/mcp.ts';
import { runPaced } from './lib/paced-load.ts';
import { percentile } from './lib/stats.ts';

export type Scenario =
  /**
   * tools/call of bulk_update_records with arguments no other request used; `count` records
   * (default 500) make ceil(count / 500) steps. On the 2026 wire with the tasks extension, or
   * (`wire: '2025'`) task-augmented (`task: {}`) on the 2025-11-25 wire as the v1 SDK sends it.
   */
  | { kind: 'start'; tokens: string[]; runTag: string; count?: number; wire?: '2026' | '2025' }
  /** tasks/get on the 2026 wire, round-robin over (token, taskId) pairs. */
  | { kind: 'poll'; pairs: Array<{ token: string; taskId: string }> }
  /**
   * tasks/get on the 2025-11-25 wire as the v1 SDK sends it after `initialize` on a
   * stateless server (no session id, no `_meta`); or the job tools' `get_job_status`
   * (tools/call on the same wire), as a client without tasks polls.
   */
  | { kind: 'poll-2025' | 'poll-job'; pairs: Array<{ token: string; taskId: string }> }
  /** tasks/result on the 2025-11-25 wire (the result of an ended task; an SSE reply). */
  | { kind: 'result-2025'; pairs: Array<{ token: string; taskId: string }> }
  /** GET /tasks/:id on the baseline server, same pairs. */
  | { kind: 'baseline-poll'; pairs: Array<{ token: string; taskId: string }> }
  /** One fixed request (the retry storm). */
  | { kind: 'fixed'; token: string; body: string; method: string; name?: string };

export interface LoadSpec {
  /** Connections are split evenly across these (gateway replicas). */
  urls: string[];
  connections: number;
  durationS: number;
  /** Stop after this many requests in all instead (durationS then only bounds the wait). */
  amount?: number;
  /**
   * Offered requests per second over all URLs: open loop, evenly spaced, up to `connections`
   * in flight, each request's latency counted from when it was due (lib/paced-load.ts).
   * Unset: every connection sends its next request as soon as the last is answered.
   */
  rate?: number;
  scenario: Scenario;
}

export interface LoadResult {
  requests: number;
  durationS: number;
  perSecond: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  /** 2xx replies whose JSON-RPC body was an error. */
  rpcErrors: number;
  statusCounts: Record<string, number>;
  /** CPU time of the load generator process itself. */
  cpuMs: number;
}

/** What the v1 SDK's client sends with every request after `initialize` (2025-11-25). */
function headers2025(token: string): Record<string, string> {
  return {
    authorization: `Bearer ${token}`,
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': '2025-11-25',
  };
}

function requestFor(spec: LoadSpec, url: string, offset: number): autocannon.Request {
  const s = spec.scenario;
  const path = new URL(url).pathname;
  let n = offset;
  switch (s.kind) {
    case 'start':
      return {
        method: 'POST',
        path,
        setupRequest: (req) => {
          const i = n++;
          const token = s.tokens[i % s.tokens.length]!;
          // Distinct arguments, so each derived idempotency key differs.
          const call = {
            name: 'bulk_update_records',
            arguments: {
              collection: `bench-${s.runTag}`,
              count: s.count ?? 500,
              patch: { n: i, tag: s.runTag },
            },
          };
          if (s.wire === '2025') {
            const params = { ...call, task: {} };
            const body = JSON.stringify({ jsonrpc: '2.0', id: i, method: 'tools/call', params });
            return { ...req, headers: headers2025(token), body };
          }
          const body = body2026('tools/call', call, i);
          return { ...req, headers: headers2026(token, 'tools/call', 'bulk_update_records'), body };
        },
      };
    case 'poll':
      return {
        method: 'POST',
        path,
        setupRequest: (req) => {
          const i = n++;
          const { token, taskId } = s.pairs[i % s.pairs.length]!;
          return {
            ...req,
            headers: headers2026(token, 'tasks/get', taskId),
            body: body2026('tasks/get', { taskId }, i),
          };
        },
      };
    case 'poll-2025':
    case 'result-2025':
    case 'poll-job': {
      const job = s.kind === 'poll-job';
      const method = s.kind === 'result-2025' ? 'tasks/result' : 'tasks/get';
      return {
        method: 'POST',
        path,
        setupRequest: (req) => {
          const i = n++;
          const { token, taskId } = s.pairs[i % s.pairs.length]!;
          return {
            ...req,
            headers: headers2025(token),
            body: JSON.stringify(
              job
                ? {
                    jsonrpc: '2.0',
                    id: i,
                    method: 'tools/call',
                    params: { name: 'get_job_status', arguments: { jobId: taskId } },
                  }
                : { jsonrpc: '2.0', id: i, method, params: { taskId } },
            ),
          };
        },
      };
    }
    case 'baseline-poll':
      return {
        method: 'GET',
        setupRequest: (req) => {
          const { token, taskId } = s.pairs[n++ % s.pairs.length]!;
          return {
            ...req,
            path: `/tasks/${taskId}`,
            headers: { authorization: `Bearer ${token}` },
          };
        },
      };
    case 'fixed':
      return {
        method: 'POST',
        path,
        setupRequest: (req) => ({
          ...req,
          headers: headers2026(s.token, s.method, s.name),
          body: s.body,
        }),
      };
  }
}

async function runOne(spec: LoadSpec, url: string, connections: number, offset: number) {
  let rpcErrors = 0;
  const result = await autocannon({
    url,
    connections,
    ...(spec.amount !== undefined ? { amount: spec.amount } : { duration: spec.durationS }),
    timeout: 30,
    requests: [
      {
        ...requestFor(spec, url, offset),
        onResponse: (status: number, body: string) => {
          if (status < 300 && body.includes('"error":{')) rpcErrors++;
        },
      },
    ],
  });
  return { result, rpcErrors };
}

export async function runLoad(spec: LoadSpec): Promise<LoadResult> {
  if (spec.rate) return runPacedLoad(spec, spec.rate);
  const per = Math.max(1, Math.floor(spec.connections / spec.urls.length));
  const runs = await Promise.all(spec.urls.map((u, i) => runOne(spec, u, per, i * 1_000_000_000)));
  const total = runs.reduce((s, r) => s + r.result.requests.total, 0);
  const duration = Math.max(...runs.map((r) => r.result.duration));
  const statusCounts: Record<string, number> = {};
  for (const r of runs) {
    for (const [code, c] of Object.entries(r.result.statusCodeStats ?? {})) {
      statusCounts[code] = (statusCounts[code] ?? 0) + (c as { count: number }).count;
    }
  }
  // Percentiles across replicas: weighted by requests for p50, the worst for the tails.
  const weighted = (f: (r: autocannon.Result) => number) =>
    runs.reduce((s, r) => s + f(r.result) * r.result.requests.total, 0) / Math.max(1, total);
  return {
    requests: total,
    durationS: duration,
    perSecond: total / duration,
    p50: weighted((r) => r.latency.p50),
    p90: Math.max(...runs.map((r) => r.result.latency.p90)),
    p99: Math.max(...runs.map((r) => r.result.latency.p99)),
    max: Math.max(...runs.map((r) => r.result.latency.max)),
    non2xx: runs.reduce((s, r) => s + r.result.non2xx, 0),
    errors: runs.reduce((s, r) => s + r.result.errors, 0),
    timeouts: runs.reduce((s, r) => s + r.result.timeouts, 0),
    rpcErrors: runs.reduce((s, r) => s + r.rpcErrors, 0),
    statusCounts,
    cpuMs: (process.cpuUsage().user + process.cpuUsage().system) / 1000,
  };
}

async function runPacedLoad(spec: LoadSpec, rate: number): Promise<LoadResult> {
  const targets = spec.urls.map((url, i) => {
    const r = requestFor(spec, url, i * 1_000_000_000);
    const setup = r.setupRequest as (
      req: autocannon.Request,
      context: object,
    ) => autocannon.Request;
    return { url, build: (req: autocannon.Request) => setup({ ...req, method: r.method }, {}) };
  });
  const r = await runPaced({
    targets,
    rate,
    connections: spec.connections,
    durationS: spec.durationS,
    ...(spec.amount !== undefined ? { amount: spec.amount } : {}),
  });
  return {
    requests: r.requests,
    durationS: r.durationS,
    perSecond: r.requests / r.durationS,
    p50: percentile(r.latenciesMs, 50),
    p90: percentile(r.latenciesMs, 90),
    p99: percentile(r.latenciesMs, 99),
    max: Math.max(0, ...r.latenciesMs),
    non2xx: r.non2xx,
    errors: r.errors,
    timeouts: r.timeouts,
    rpcErrors: r.rpcErrors,
    statusCounts: r.statusCounts,
    cpuMs: (process.cpuUsage().user + process.cpuUsage().system) / 1000,
  };
}

if (import.meta.main) {
  const spec = JSON.parse(readFileSync(process.argv[2]!, 'utf8')) as LoadSpec;
  runLoad(spec).then(
    (r) => process.stdout.write(JSON.stringify(r) + '\n'),
    (error: unknown) => {
      process.stderr.write(`load: ${error instanceof Error ? error.stack : String(error)}\n`);
      process.exit(1);
    },
  );
}
