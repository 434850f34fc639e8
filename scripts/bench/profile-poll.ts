// Where a poll's CPU goes in the gateway: a V8 CPU profile of the gateway process while one
// kind of poll runs at load, its samples summed by what they ran (the MCP SDK's transport
// and server, zod, Express, jose, the pg client, the gateway's own code, the audit and task
// packages, Node's HTTP and streams, GC). Prints a table, and keeps the .cpuprofile (open it
// in Chrome DevTools or speedscope for the flame graph).
//
//   node scripts/bench/profile-poll.ts [poll | poll-2025 | poll-job | start | run] [seconds]
//
// `start` profiles task starts on the 2026 wire (tools/call of bulk_update_records, 2 steps)
// with no worker running, so the profile holds the start request alone. `run` profiles the
// one worker instead, while it runs the tasks such starts made (at 20/s) to their end; with
// PROFILE=idp, `start` and `run` profile the dev IdP instead (the delegation exchange of each
// start, and the workers' stage-token exchanges).
//   node scripts/bench/profile-poll.ts FILE.cpuprofile      (the summary of a kept profile)
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import pg from 'pg';
import path from 'node:path';
import { preparedDatabase } from './lib/database.ts';
import { runLoadProcess } from './lib/load-client.ts';
import { startTask } from './lib/mcp.ts';
import { startProcessStack } from './lib/process-stack.ts';
import { NO_CAPS } from './benches/throughput.ts';

type Kind = 'poll' | 'poll-2025' | 'poll-job' | 'start' | 'run';
const kept = process.argv[2]?.endsWith('.cpuprofile') ? process.argv[2] : undefined;
const kind = (kept ? 'kept profile' : (process.argv[2] ?? 'poll-2025')) as Kind;
if (!kept && !['poll', 'poll-2025', 'poll-job', 'start', 'run'].includes(kind))
  throw new Error(`unknown poll kind ${kind}`);
const seconds = Number(process.argv[3] ?? 10);
const idp = process.env.PROFILE === 'idp';
if (idp && kind !== 'start' && kind !== 'run') throw new Error('PROFILE=idp: start or run only');

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** What a frame belongs to, by its script's URL. */
function category(frame: ProfileNode['callFrame']): string {
  const { url, functionName } = frame;
  if (!url) {
    if (functionName === '(garbage collector)') return 'GC';
    if (functionName === '(idle)' || functionName === '(program)') return functionName;
    return 'V8 builtins (JSON, RegExp, …)';
  }
  if (url.startsWith('node:')) return 'Node (http, net, streams)';
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
  if (m) {
    const pkg = m[1]!;
    if (pkg === '@modelcontextprotocol/sdk') return 'MCP SDK v1 (server, transport)';
    if (pkg.startsWith('@modelcontextprotocol/')) return 'MCP SDK v2';
    if (pkg === 'zod') return 'zod (schema validation)';
    if (/^(pg|pg-protocol|pg-pool|pg-types|postgres-.*)$/.test(pkg)) return 'pg client (SQL)';
    if (pkg === 'jose') return 'jose (JWT)';
    if (
      /^(express|router|body-parser|raw-body|finalhandler|send|accepts|type-is|content-type|qs|iconv-lite|on-finished|statuses|http-errors|negotiator|mime-types|cookie)$/.test(
        pkg,
      )
    )
      return 'Express and HTTP helpers';
    if (pkg.startsWith('@opentelemetry/')) return 'OpenTelemetry';
    if (pkg === 'winston' || pkg.startsWith('logform') || pkg === 'triple-beam') return 'logging';
    return `other: ${pkg}`;
  }
  const own = /\/(apps|packages)\/([^/]+)\//.exec(url);
  if (own) return `${own[1]}/${own[2]}`;
  return 'other';
}

/** Waits until no task of the database is still open (for `run`: the worker's profile). */
async function allEnded(url: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    for (let i = 0; i < 600; i++) {
      const r = await client.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM app.tasks WHERE ended_at IS NULL',
      );
      if (r.rows[0]!.n === 0) return;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    throw new Error('tasks still open after 5 minutes');
  } finally {
    await client.end();
  }
}

/** Runs the stack and the load with the gateway (or, for `run`, the worker) profiled. */
async function profileGateway(): Promise<string> {
  const db = await preparedDatabase();
  const profDir = mkdtempSync(path.join(os.tmpdir(), 'mtg-profile-'));
  const profiling = `--cpu-prof --cpu-prof-dir=${profDir}`;
  const stack = await startProcessStack({
    databaseUrl: db.url,
    databaseUrls: db.logins,
    gateways: 1,
    gatewaySlots: 1,
    workers: kind === 'run' ? 1 : 0,
    env: { LOG_LEVEL: 'info' },
    gatewayEnv: { ...NO_CAPS, ...(kind === 'run' || idp ? {} : { NODE_OPTIONS: profiling }) },
    workerEnv: { DEMO_STEP_MS: '100', ...(idp ? {} : { NODE_OPTIONS: profiling }) },
    ...(idp ? { idpEnv: { NODE_OPTIONS: profiling } } : {}),
  });
  try {
    const pairs: Array<{ token: string; taskId: string }> = [];
    for (let u = 0; u < 16; u++) {
      const token = await stack.token(`profile-user-${u}`, `profile-tenant-${u % 4}`);
      const taskId = await startTask(stack.mcpUrl, token, 'bulk_update_records', {
        collection: 'profile',
        count: 500,
        patch: { u },
      });
      pairs.push({ token, taskId });
    }
    const scenario =
      kind === 'start' || kind === 'run'
        ? {
            kind: 'start' as const,
            tokens: pairs.map((p) => p.token),
            runTag: `profile-${Date.now()}`,
            count: 1000,
          }
        : { kind, pairs };
    const spec = {
      urls: [stack.mcpUrl],
      connections: kind === 'poll' || kind.startsWith('poll-') ? 50 : 20,
      scenario,
      ...(kind === 'run' ? { rate: 20 } : {}),
    };
    if (kind !== 'run') await runLoadProcess({ ...spec, durationS: 3 });
    const load = await runLoadProcess({ ...spec, durationS: seconds });
    if (kind === 'run') await allEnded(db.url);
    process.stderr.write(
      `${kind}: ${load.perSecond.toFixed(0)}/s, p50 ${load.p50} ms, ${load.non2xx + load.errors + load.rpcErrors} failed ${JSON.stringify({ statuses: load.statusCounts, rpcErrors: load.rpcErrors, errors: load.errors })}\n`,
    );
  } finally {
    // The profile is written when the gateway exits.
    await stack.stop();
    await db.drop();
  }

  const file = readdirSync(profDir).find((f) => f.endsWith('.cpuprofile'));
  if (!file) throw new Error(`no profile written in ${profDir}`);
  return path.join(profDir, file);
}

const file = kept ?? (await profileGateway());
const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
// A builtin (JSON.stringify, a RegExp) or Node's own code counts for the library that called
// it: walk up the stack to the first frame of a package or of the project.
const GENERIC = new Set(['Node (http, net, streams)', 'V8 builtins (JSON, RegExp, …)', 'other']);
function owner(id: number): string {
  const leaf = category(byId.get(id)!.callFrame);
  if (!GENERIC.has(leaf)) return leaf;
  for (let p = parent.get(id); p !== undefined; p = parent.get(p)) {
    const c = category(byId.get(p)!.callFrame);
    if (!GENERIC.has(c) && c !== '(program)') return c;
  }
  return leaf;
}
const self = new Map<string, number>();
const attributed = new Map<string, number>();
let total = 0;
profile.samples.forEach((id, i) => {
  const c = category(byId.get(id)!.callFrame);
  const us = profile.timeDeltas[i] ?? 0;
  if (c === '(idle)') return;
  self.set(c, (self.get(c) ?? 0) + us);
  const o = owner(id);
  attributed.set(o, (attributed.get(o) ?? 0) + us);
  total += us;
});
const table = (m: Map<string, number>) =>
  [...m.entries()]
    .sort((a, b) => b[1] - a[1])
    .filter(([, us]) => us / total >= 0.005)
    .map(([c, us]) => `${((us / total) * 100).toFixed(1).padStart(5)} %  ${c}`)
    .join('\n');
process.stdout.write(
  `busy CPU of the ${idp ? 'IdP' : kind === 'run' ? 'worker' : 'gateway'}, ${kind}; profile ${file}\n\n` +
    `by the package or project code that ran it (builtins and Node internals counted for their caller):\n${table(attributed)}\n\n` +
    `by self time:\n${table(self)}\n`,
);
