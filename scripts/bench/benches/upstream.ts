// Upstream MCP servers: what a proxied instant call adds over calling the upstream directly
// (latency and CPU), and how long a durable upstream task takes from start to the upstream's
// tools/call. Its own small stack (gateway, one worker, the demo upstream) on the bench's
// database, since the upstream must be in UPSTREAMS_FILE when the IdP and gateway start.
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CreateTaskResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { ROLES } from '@mtg/db';
import { installQueue } from '@mtg/tasks';
import { devUserToken } from '../../../apps/cli/src/lib/dev-user-token.ts';
import { pollUntil } from '../../lib/poll-until.ts';
import type { BenchContext } from '../lib/context.ts';
import { cpuMeter, describeCpu, stackBackends, type CpuReport } from '../lib/cpu.ts';
import { freePort, REPO_ROOT, spawnProc, startProcessStack } from '../lib/process-stack.ts';
import { fmt, median, percentile } from '../lib/stats.ts';
import { NO_CAPS } from './throughput.ts';

async function connect(url: string, token: string): Promise<Client> {
  const client = new Client({ name: 'bench', version: '0' }, { capabilities: {} });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(url), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
    }),
  );
  return client;
}

async function timedCalls(
  client: Client,
  name: string,
  n: number,
  cpu: () => ReturnType<typeof cpuMeter>,
): Promise<{ ms: number[]; cpu: CpuReport }> {
  const args = (i: number | string) => (name === 'whoami' ? {} : { id: `T-${i}` });
  for (let i = 0; i < 5; i++) await client.callTool({ name, arguments: args(`warm-${i}`) });
  const meter = cpu();
  const ms: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    const r = await client.callTool({ name, arguments: args(i) });
    ms.push(performance.now() - t0);
    if (r.isError) throw new Error(`${name} failed: ${JSON.stringify(r.content)}`);
  }
  return { ms, cpu: meter.stop() };
}

/**
 * Client-observed latency of several tools, interleaved call by call: on a shared machine the
 * load changes over a run, and each tool then sees the same load.
 */
async function interleavedLatency<C extends Array<{ client: Client; name: string }>>(
  calls: [...C],
  n: number,
): Promise<{ [K in keyof C]: number[] }> {
  const ms = calls.map(() => [] as number[]);
  for (let i = 0; i < n; i++) {
    for (const [j, { client, name }] of calls.entries()) {
      const t0 = performance.now();
      const r = await client.callTool({ name, arguments: { id: `L-${i}` } });
      ms[j]!.push(performance.now() - t0);
      if (r.isError) throw new Error(`${name} failed: ${JSON.stringify(r.content)}`);
    }
  }
  return ms as { [K in keyof C]: number[] };
}

export async function benchUpstream(ctx: BenchContext): Promise<void> {
  const n = Math.max(50, ctx.options.samples * 5);
  const demoPort = await freePort();
  const demoUrl = `http://127.0.0.1:${demoPort}/mcp`;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'mtg-bench-upstream-'));
  const file = path.join(dir, 'upstreams.yaml');
  writeFileSync(
    file,
    [
      'upstreams:',
      '  demo:',
      `    url: ${demoUrl}`,
      '    prefix: demo.',
      '    scope: upstream:demo',
      // The same upstream again without kept sessions: what a session per call costs.
      '  fresh:',
      `    url: ${demoUrl}`,
      '    prefix: fresh.',
      '    scope: upstream:demo',
      '    mode: instant',
      '    include: [lookup_ticket]',
      '    maxSessions: 0',
      '',
    ].join('\n'),
  );
  await installQueue(
    ctx.db.url,
    [ROLES.gateway, ROLES.worker],
    ['upstream.demo', 'upstream.fresh'],
  );
  const stack = await startProcessStack({
    databaseUrl: ctx.db.url,
    databaseUrls: ctx.db.logins,
    gateways: 1,
    workers: 1,
    env: { LOG_LEVEL: ctx.options.logLevel, UPSTREAMS_FILE: file },
    // The per-caller limit on proxied calls would refuse one caller's 600+ calls a minute.
    gatewayEnv: { ...NO_CAPS, RATE_LIMIT_UPSTREAM_CALLS_PER_MINUTE: '0' },
  });
  // Started after the IdP (it trusts it); the gateway lists it on its retry.
  const demo = spawnProc(
    'upstream-demo',
    'upstream-demo',
    path.join(REPO_ROOT, 'apps', 'upstream-demo', 'src', 'main.ts'),
    {
      ...process.env,
      UPSTREAM_DEMO_PORT: String(demoPort),
      AUTH_ISSUER: stack.idpUrl,
      UPSTREAM_DEMO_STEP_MS: '50',
    },
    path.join(stack.dataDir, 'logs', 'upstream-demo.log'),
  );
  try {
    await demo.ready;
    const gatewayToken = await stack.token('bench-upstream', 'bench-tenant-0');
    const upstreamToken = await devUserToken({
      issuer: stack.idpUrl,
      client: 'mcp-agent',
      clientSecret: stack.secrets.clientSecrets['mcp-agent'],
      sub: 'bench-upstream',
      tenant: 'bench-tenant-0',
      resource: demoUrl,
    });
    const viaGateway = await connect(stack.mcpUrl, gatewayToken);
    await pollUntil(
      async () => (await viaGateway.listTools()).tools.map((t) => t.name),
      (names) =>
        names.includes('demo.lookup_ticket') &&
        names.includes('demo.build_artifact') &&
        names.includes('fresh.lookup_ticket'),
      30_000,
      200,
      'the gateway to list the demo upstream',
    );
    const direct = await connect(demoUrl, upstreamToken);
    const meter = () =>
      cpuMeter({
        gateway: () => [stack.gateways[0]!.pid],
        idp: () => [stack.idp.pid],
        upstream: () => [demo.pid],
        postgres: () => stackBackends(ctx),
      });
    const base = await timedCalls(direct, 'lookup_ticket', n, meter);
    const proxied = await timedCalls(viaGateway, 'demo.lookup_ticket', n, meter);
    const unpooled = await timedCalls(viaGateway, 'fresh.lookup_ticket', n, meter);
    // The gateway's fixed cost per tools/call, with a tool of its own (no upstream).
    const own = await timedCalls(viaGateway, 'whoami', n, meter);
    // Latency: the three interleaved (the sequential passes above give the CPU).
    [base.ms, proxied.ms, unpooled.ms] = await interleavedLatency(
      [
        { client: direct, name: 'lookup_ticket' },
        { client: viaGateway, name: 'demo.lookup_ticket' },
        { client: viaGateway, name: 'fresh.lookup_ticket' },
      ],
      n,
    );
    await direct.close();
    const p50 = (v: number[]) => median(v);
    const p95 = (v: number[]) => percentile(v, 95);
    const perCall = (r: CpuReport, group: string) => (r.ms[group] ?? 0) / n;
    ctx.rows.push({
      section: 'Upstreams',
      measure: 'proxied instant call (demo.lookup_ticket), client-observed',
      result: `p50 ${fmt(p50(proxied.ms), 1)} ms, p95 ${fmt(p95(proxied.ms), 1)} ms`,
      baseline: `the upstream called directly on one session: p50 ${fmt(p50(base.ms), 1)} ms, p95 ${fmt(p95(base.ms), 1)} ms`,
      samples: `${n} calls each, interleaved with the direct and per-call-session ones`,
      note: `added p50 ${fmt(p50(proxied.ms) - p50(base.ms), 1)} ms: the gateway's own tools/call path, one upstream request on the caller's kept session and the audit event; the exchanged token is reused while fresh`,
    });
    ctx.rows.push({
      section: 'Upstreams',
      measure: 'proxied instant call without kept sessions (maxSessions: 0), client-observed',
      result: `p50 ${fmt(p50(unpooled.ms), 1)} ms, p95 ${fmt(p95(unpooled.ms), 1)} ms`,
      baseline: `with kept sessions: p50 ${fmt(p50(proxied.ms), 1)} ms`,
      samples: `${n} calls, interleaved`,
      note: `a new upstream session per call (initialize, initialized, call, DELETE): ${fmt(p50(unpooled.ms) - p50(proxied.ms), 1)} ms more at p50; gateway CPU ${fmt(perCall(unpooled.cpu, 'gateway'), 1)} ms, upstream ${fmt(perCall(unpooled.cpu, 'upstream'), 1)} ms per call`,
    });
    ctx.rows.push({
      section: 'Upstreams',
      measure: 'CPU of a proxied instant call',
      result: `gateway ${fmt(perCall(proxied.cpu, 'gateway'), 1)} ms, idp ${fmt(perCall(proxied.cpu, 'idp'), 1)} ms, upstream ${fmt(perCall(proxied.cpu, 'upstream'), 1)} ms, postgres ${fmt(perCall(proxied.cpu, 'postgres'), 1)} ms per call`,
      baseline: `direct: upstream ${fmt(perCall(base.cpu, 'upstream'), 1)} ms per call; the gateway's own whoami: gateway ${fmt(perCall(own.cpu, 'gateway'), 1)} ms, p50 ${fmt(p50(own.ms), 1)} ms`,
      samples: `${n} calls`,
      note: describeCpu(proxied.cpu, n, 'call'),
    });

    // start → the upstream's tools/call (the durable task's first upstream request).
    const starts: number[] = [];
    const samples = Math.max(10, ctx.options.samples);
    for (let i = 0; i < samples; i++) {
      const t0 = Date.now();
      const created = await viaGateway.request(
        {
          method: 'tools/call',
          params: { name: 'demo.build_artifact', arguments: { project: `bench-${i}` }, task: {} },
        },
        CreateTaskResultSchema,
      );
      const key = `task-${created.task.taskId}`;
      const calls = await pollUntil(
        async () =>
          (await (await fetch(new URL('/_calls', demoUrl))).json()) as Array<{
            idempotencyKey?: string;
            at: string;
          }>,
        (all) => all.some((c) => c.idempotencyKey === key),
        10_000,
        10,
        'the upstream to see the task',
      );
      starts.push(Date.parse(calls.find((c) => c.idempotencyKey === key)!.at) - t0);
    }
    await viaGateway.close();
    ctx.rows.push({
      section: 'Upstreams',
      measure: 'start → upstream tools/call (demo.build_artifact as a durable task)',
      result: `p50 ${fmt(median(starts))} ms, p95 ${fmt(percentile(starts, 95))} ms`,
      samples: `${samples} sequential starts`,
      note: 'commit, NOTIFY, claim, delegation exchanged for the upstream, upstream initialize and tools/call with task',
    });
  } finally {
    await demo.stop().catch(() => {});
    await stack.stop().catch(() => {});
  }
}
