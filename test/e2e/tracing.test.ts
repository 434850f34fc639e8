// One trace from the agent's request to the downstream write, across the gateway (in this
// process) and a real worker process, as a real OTLP/HTTP receiver started here decodes it:
// the request continues the caller's `traceparent`, the task's job carries the context to the
// worker, whose run, steps, token exchanges and downstream calls are spans of that trace; log
// lines and audit events carry the trace id.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ChildProcess } from 'node:child_process';
import { Writable } from 'node:stream';
import { randomBytes } from 'node:crypto';
import winston from 'winston';
import { trace } from '@opentelemetry/api';
import { createLogger } from '@mtg/log';
import { startTracing, startTracingFromEnv, type Tracing } from '@mtg/telemetry';
import { pollUntil } from '../support/poll.ts';
import { rpc2026 } from '../support/raw-2026.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { startWorkerProcess, waitForExit } from '../support/worker-process.ts';

interface Span {
  service: string;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  links: string[];
  attributes: Record<string, unknown>;
}

/** OTLP/JSON ids are hex; older encoders sent base64. */
const hex = (id: unknown) =>
  typeof id !== 'string' || id === ''
    ? ''
    : /^[0-9a-f]+$/.test(id)
      ? id
      : Buffer.from(id, 'base64').toString('hex');
const value = (v: Record<string, unknown>) =>
  v.stringValue ?? v.intValue ?? v.boolValue ?? v.doubleValue;

/** A collector's OTLP/HTTP traces endpoint on loopback, decoding OTLP JSON. */
async function startReceiver() {
  const spans: Span[] = [];
  const contentTypes = new Set<string>();
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      contentTypes.add(String(req.headers['content-type']));
      if (req.url !== '/v1/traces') return void res.writeHead(404).end();
      const doc = JSON.parse(body) as { resourceSpans: any[] };
      for (const rs of doc.resourceSpans ?? []) {
        const service = value(
          rs.resource.attributes.find((a: any) => a.key === 'service.name').value,
        ) as string;
        for (const ss of rs.scopeSpans ?? [])
          for (const s of ss.spans ?? [])
            spans.push({
              service,
              traceId: hex(s.traceId),
              spanId: hex(s.spanId),
              parentSpanId: hex(s.parentSpanId),
              name: s.name,
              links: (s.links ?? []).map((l: any) => hex(l.traceId)),
              attributes: Object.fromEntries(
                (s.attributes ?? []).map((a: any) => [a.key, value(a.value)]),
              ),
            });
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    contentTypes,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

let receiver: Awaited<ReturnType<typeof startReceiver>>;
let tracing: Tracing;
let stack: Stack;
let worker: ChildProcess;
const lines: Array<Record<string, unknown>> = [];

beforeAll(async () => {
  receiver = await startReceiver();
  // The gateway runs in this process: trace it here, as its main.ts would.
  tracing = await startTracing({
    serviceName: 'gateway',
    endpoint: receiver.url,
    scheduledDelayMs: 100,
  });
  const logger = createLogger('test');
  logger.clear().add(
    new winston.transports.Stream({
      stream: new Writable({
        write(chunk: Buffer, _e, done) {
          for (const raw of chunk.toString().split('\n').filter(Boolean))
            lines.push(JSON.parse(raw));
          done();
        },
      }),
    }),
  );
  stack = await startStack({ workers: 0, logger, env: { DEMO_STEP_MS: '10' } });
  worker = await startWorkerProcess(stack, 'traced-worker', {
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_BSP_SCHEDULE_DELAY: '100',
  });
});
afterAll(async () => {
  if (worker) {
    worker.kill('SIGTERM');
    await waitForExit(worker);
  }
  await stack?.close();
  await tracing?.shutdown();
  await receiver?.close();
});

test("one trace from the agent's request to the downstream write, across the gateway and the worker", async () => {
  const traceId = randomBytes(16).toString('hex');
  const callerSpan = randomBytes(8).toString('hex');
  const token = await stack.token('tracy', 'acme');
  const started = await rpc2026(
    stack.mcpUrl,
    token,
    'tools/call',
    { name: 'bulk_update_records', arguments: { collection: 'traced', count: 3, patch: { t: 1 } } },
    { tasksExtension: true, headers: { traceparent: `00-${traceId}-${callerSpan}-01` } },
  );
  const taskId = started.body.result.taskId as string;
  expect(taskId).toEqual(expect.any(String));
  await pollUntil(
    () => rpc2026(stack.mcpUrl, token, 'tasks/get', { taskId }, { tasksExtension: true }),
    (r) => r.body.result?.status === 'completed',
    20_000,
    50,
  );
  const inTrace = () => receiver.spans.filter((s) => s.traceId === traceId);
  const downstreamWrite = (s: Span) =>
    s.service === 'worker' &&
    s.name === 'HTTP POST' &&
    String(s.attributes['url.full']).startsWith(stack.downstreamUrl) &&
    Math.floor(Number(s.attributes['http.response.status_code']) / 100) === 2;
  await pollUntil(
    async () => inTrace(),
    (spans) => spans.some(downstreamWrite) && spans.some((s) => s.name === 'task.run'),
    15_000,
    100,
  );
  const spans = inTrace();
  const byId = new Map(spans.map((s) => [s.spanId, s]));
  // The gateway's request span continues the caller's span.
  const request = spans.find((s) => s.service === 'gateway' && s.name === 'POST /mcp')!;
  expect(request.parentSpanId).toBe(callerSpan);
  expect(spans.some((s) => s.service === 'gateway' && s.name === 'authenticate')).toBe(true);
  const start = spans.find((s) => s.name === 'task.start')!;
  expect(start.parentSpanId).toBe(request.spanId);
  // The worker's run continues it, through the job.
  const run = spans.find((s) => s.service === 'worker' && s.name === 'task.run')!;
  expect(run.attributes['mtg.task.id']).toBe(taskId);
  expect(spans.some((s) => s.service === 'worker' && s.name.startsWith('step '))).toBe(true);
  expect(spans.some((s) => s.service === 'worker' && s.name === 'token.exchange')).toBe(true);
  // The write to the downstream is a span of the same trace, under the run.
  const write = spans.find(downstreamWrite)!;
  let ancestor: Span | undefined = write;
  while (ancestor && ancestor !== run) ancestor = byId.get(ancestor.parentSpanId);
  expect(ancestor).toBe(run);
  // Polls are spans of their own requests' traces, linked to the task's.
  const polls = receiver.spans.filter(
    (s) => (s.name === 'task.get' || s.name === 'task.read') && s.traceId !== traceId,
  );
  expect(polls.length).toBeGreaterThan(0);
  for (const p of polls) expect(p.links).toEqual([traceId]);
  // OTLP JSON, as the receiver decoded it.
  expect([...receiver.contentTypes]).toEqual(['application/json']);

  // Audit events and log lines carry the trace.
  const created = await sql(
    stack.db.url,
    `SELECT body FROM audit.events WHERE task_id = $1 AND type = 'task.created'`,
    [taskId],
  );
  expect(JSON.parse(created[0].body).traceId).toBe(traceId);
  const started2 = await sql(
    stack.db.url,
    `SELECT body FROM audit.events WHERE task_id = $1 AND type = 'task.started'`,
    [taskId],
  );
  expect(JSON.parse(started2[0].body).traceId).toBe(traceId);
  expect(lines.some((l) => l.message === 'request' && l.trace_id === traceId)).toBe(true);
});

test('an idle worker makes no trace, and discovers its IdP once for every task', async () => {
  // The worker fetched from each of its queues at start and found them empty: no span.
  const token = await stack.token('tracy', 'acme');
  const traces: string[] = [];
  for (let i = 0; i < 2; i++) {
    const traceId = randomBytes(16).toString('hex');
    traces.push(traceId);
    const started = await rpc2026(
      stack.mcpUrl,
      token,
      'tools/call',
      {
        name: 'bulk_update_records',
        arguments: { collection: `quiet-${i}`, count: 1, patch: { i } },
      },
      {
        tasksExtension: true,
        headers: { traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01` },
      },
    );
    const taskId = started.body.result.taskId as string;
    await pollUntil(
      () => rpc2026(stack.mcpUrl, token, 'tasks/get', { taskId }, { tasksExtension: true }),
      (r) => r.body.result?.status === 'completed',
      20_000,
      50,
    );
  }
  await pollUntil(
    async () => receiver.spans,
    (spans) => traces.every((t) => spans.some((s) => s.traceId === t && s.name === 'task.run')),
    15_000,
    100,
  );
  const worker = receiver.spans.filter((s) => s.service === 'worker');
  const receives = worker.filter((s) => s.name.startsWith('receive '));
  // Only fetches that brought a job, each linked to the trace of the request that created it.
  expect(receives.length).toBeGreaterThan(0);
  for (const r of receives) {
    expect(
      r.attributes['messaging.message.id'] ?? r.attributes['messaging.batch.message_count'],
    ).toBeTruthy();
    expect(r.links.length).toBeGreaterThan(0);
  }
  for (const t of traces) expect(receives.some((r) => r.links.includes(t))).toBe(true);
  // Three tasks, each with its token exchange and the worker's own token: one discovery.
  const discoveries = worker.filter(
    (s) =>
      s.name === 'HTTP GET' &&
      String(s.attributes['url.full']).endsWith('/.well-known/openid-configuration'),
  );
  expect(discoveries).toHaveLength(1);
});

test('with OTEL_EXPORTER_OTLP_ENDPOINT unset nothing is started', async () => {
  expect(await startTracingFromEnv({}, 'gateway')).toBeUndefined();
  await expect(
    startTracingFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'not a url' }, 'gateway'),
  ).rejects.toThrow(/OTEL_EXPORTER_OTLP_ENDPOINT/);
  expect(trace).toBeDefined();
});
