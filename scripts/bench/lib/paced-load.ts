// An offered rate, open loop: request k is due at k / rate seconds into the run, whatever
// happened to the ones before it, and its latency counts from when it was due (a request
// that waits for a free connection waits on the clock, as a real client's would).
//
// autocannon's `overallRate` is not that: it gives each connection rate / connections
// requests per second and resets every connection's allowance on the same one-second tick, so
// at 10/s its 10 connections fire together at the top of each second — a burst of ten, then
// nothing. Latency measured under such bursts is the burst's queueing, not the rate's.
import http from 'node:http';
import type autocannon from 'autocannon';

export interface PacedRequest {
  url: string;
  build: (req: autocannon.Request) => autocannon.Request;
}

export interface PacedResult {
  requests: number;
  durationS: number;
  latenciesMs: number[];
  statusCounts: Record<string, number>;
  non2xx: number;
  errors: number;
  timeouts: number;
  rpcErrors: number;
}

const TIMEOUT_MS = 30_000;

/**
 * Sends `rate` requests per second in all, evenly spaced and spread round-robin over
 * `targets`, on at most `connections` kept-alive sockets, for `durationS` seconds (or
 * `amount` requests); then waits for the answers.
 */
export async function runPaced(o: {
  targets: PacedRequest[];
  rate: number;
  connections: number;
  durationS: number;
  amount?: number;
}): Promise<PacedResult> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: o.connections });
  const r: PacedResult = {
    requests: 0,
    durationS: 0,
    latenciesMs: [],
    statusCounts: {},
    non2xx: 0,
    errors: 0,
    timeouts: 0,
    rpcErrors: 0,
  };
  const total = o.amount ?? Math.max(1, Math.floor(o.rate * o.durationS));
  const intervalMs = 1000 / o.rate;
  const t0 = performance.now();
  const inFlight: Promise<void>[] = [];
  for (let k = 0; k < total; k++) {
    const due = t0 + k * intervalMs;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    const target = o.targets[k % o.targets.length]!;
    inFlight.push(send(agent, target, due, r));
  }
  await Promise.all(inFlight);
  r.durationS = (performance.now() - t0) / 1000;
  agent.destroy();
  return r;
}

function send(agent: http.Agent, target: PacedRequest, due: number, r: PacedResult) {
  const url = new URL(target.url);
  const req = target.build({ method: 'GET', path: url.pathname, headers: {} });
  return new Promise<void>((resolve) => {
    const done = (status?: number, body?: string) => {
      r.requests++;
      r.latenciesMs.push(performance.now() - due);
      if (status === undefined) return resolve();
      r.statusCounts[status] = (r.statusCounts[status] ?? 0) + 1;
      if (status >= 300) r.non2xx++;
      else if (body?.includes('"error":{')) r.rpcErrors++;
      resolve();
    };
    const out = http.request(
      {
        agent,
        host: url.hostname,
        port: url.port,
        method: req.method ?? 'GET',
        path: req.path ?? url.pathname,
        headers: req.headers as http.OutgoingHttpHeaders,
        timeout: TIMEOUT_MS,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => done(res.statusCode ?? 0, Buffer.concat(chunks).toString('utf8')));
        res.on('error', () => {
          r.errors++;
          done();
        });
      },
    );
    let timedOut = false;
    out.on('timeout', () => {
      timedOut = true;
      r.timeouts++;
      out.destroy(new Error('timeout'));
    });
    out.on('error', () => {
      if (!timedOut) r.errors++;
      done();
    });
    out.end(req.body as string | undefined);
  });
}
