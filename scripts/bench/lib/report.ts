// BENCHMARKS.md: machine, settings, results next to their baselines, and what limits them.
import type { BenchOptions, Row } from './context.ts';
import type { MachineInfo } from './machine.ts';
import type { MachineSpeed } from './machine-speed.ts';
import { fmt } from './stats.ts';

const cell = (s: string | undefined) => (s ?? '').replace(/\|/g, '\\|').replace(/\n/g, ' ');

export function renderReport(r: {
  machine: MachineInfo;
  /** The fixed workload at the run's start and end (lib/machine-speed.ts). */
  speed?: [MachineSpeed, MachineSpeed];
  options: BenchOptions;
  rows: Row[];
  blocks?: Array<{ section: string; lines: string[] }>;
  notes: string[];
  totalS: number;
  /** A line for the header, e.g. that the machine was shared during the run. */
  caveat?: string;
}): string {
  const m = r.machine;
  const o = r.options;
  const lines: string[] = [
    '# Benchmarks',
    '',
    'Written by `npm run bench` (scripts/bench/run.ts); re-run it to refresh this file. Every',
    'number comes from the run that wrote it; each throughput result stands next to a baseline',
    'measured in that same run on the same machine.',
    '',
    '## Machine and run',
    '',
    `- CPU: ${m.cpu}, ${m.cores} cores; memory ${m.memoryGb} GB; ${m.os}`,
    `- Node ${m.node}; PostgreSQL ${m.postgres} (${m.postgresSettings})`,
    ...(r.speed
      ? [
          `- Machine speed (scripts/bench/lib/machine-speed.ts; lower is faster): a fixed compute workload ${fmt(r.speed[0].computeMs)} ms of CPU at the run's start and ${fmt(r.speed[1].computeMs)} at its end; a loopback TCP round trip ${fmt(r.speed[0].roundTripUs, 1)} and ${fmt(r.speed[1].roundTripUs, 1)} µs of CPU. Compare runs by these before comparing their figures.`,
        ]
      : []),
    `- Runs: ${o.runs} per throughput measurement (median reported), ${o.durationS} s each, ` +
      `${o.connections} connections; ${o.samples} samples per latency measurement; log level ${o.logLevel}` +
      (o.only ? `; only: ${[...o.only].join(', ')}` : ''),
    `- Whole run: ${Math.round(r.totalS)} s`,
    '- Everything on one machine: the load generator (its own process: autocannon, or a paced',
    '  client for an offered rate), the gateway, workers, dev IdP, demo downstream and PostgreSQL',
    '  share the same 2 cores. Configure with',
    '  BENCH_RUNS, BENCH_DURATION_S, BENCH_CONNECTIONS, BENCH_SAMPLES, BENCH_ONLY (see run.ts).',
    ...(r.caveat ? [`- ${r.caveat}`] : []),
    '',
    ...goals(r.rows),
  ];
  const sections = [...new Set(r.rows.map((row) => row.section))];
  for (const section of sections) {
    lines.push(
      `## ${section}`,
      '',
      '| measure | result | baseline | goal | met | runs / samples |',
      '|---|---|---|---|---|---|',
    );
    for (const row of r.rows.filter((x) => x.section === section)) {
      const met = row.met === undefined ? '' : row.met ? 'yes' : '**no**';
      lines.push(
        `| ${cell(row.measure)} | ${cell(row.result)}${row.note ? ` (${cell(row.note)})` : ''} | ${cell(row.baseline)} | ${cell(row.goal)} | ${met} | ${cell(row.samples)} |`,
      );
    }
    lines.push('');
    for (const block of (r.blocks ?? []).filter((b) => b.section === section))
      lines.push(...block.lines);
  }
  lines.push(...ANALYSIS, ...r.notes);
  return lines.join('\n');
}

/**
 * Every goal of the run, its figure and whether it was met; a goal not met gets what limits
 * it (LIMITS, by goal id) or a marked place for that analysis.
 */
function goals(rows: Row[]): string[] {
  const withGoal = rows.filter((row) => row.met !== undefined);
  if (withGoal.length === 0) return [];
  const lines = ['## Goals', '', '| goal | figure | met |', '|---|---|---|'];
  for (const row of withGoal)
    lines.push(
      `| ${cell(row.measure)} — ${cell(row.goal)} | ${cell(row.result)} | ${row.met ? 'met' : '**not met**'} |`,
    );
  lines.push('');
  const missed = withGoal.filter((row) => !row.met);
  if (missed.length) {
    lines.push('### What limits the goals not met', '');
    for (const row of missed) {
      const why = (row.goalId && LIMITS[row.goalId]) || '_(what limits it: not analysed yet)_';
      lines.push(`- **${row.measure}** (${row.result}; ${row.goal}): ${why}`);
    }
    lines.push('');
  }
  return lines;
}

/** What limits a goal when it is not met, by goal id (see the section below for details). */
const LIMITS: Record<string, string> = {
  headline:
    "CPU: at 100 % of 2 cores the sustainable rate is 2000 ms / (CPU ms per completed task + the polls' share + the load generator's); see the per-phase table and \"The task as a whole\" below. The workers' slots are not the limit (40 slots, 0.2 s of sleep per task) — CPU is, and the figure moves by a few per cent between runs of one hour, by far more between hours of this machine (the peer's figures in the same run show the hour). Already done: prepared statements planned once per connection; the claim, each step's journal and the settlement each one statement with its audit event; the start one statement after its revocation check with its rate-limit chain (one statement), with no live-repeat lookup before it; the start and the poll answered without the SDKs' per-request servers; verified tokens remembered (by the gateway, the IdP and the demo downstream); each downstream write one statement. What remains per task is spread over four processes: about eight audit events, a delegation and a token exchange at the IdP, two downstream calls and some twelve round trips to PostgreSQL (docs/scaling.md, \"The cost of one task\"). The baseline column gives the hand-built peer under the same load in the same run.",
  'headline-2025':
    'as on the 2026 wire: CPU. The 2025-11-25 start and poll take the same fast paths to the same verbs as the 2026 ones (docs/scaling.md, "Polls on every wire"); the per-phase table below gives what a task costs on this wire.',
  'cpu-per-task':
    'see the per-phase table: PostgreSQL is the largest share, most of it in pickup + settle (the claim and the settlement, each a transaction with its audit event and WAL flush), then the worker\'s CPU and the token exchange per step ("The task as a whole" below). The hand-built peer in the baseline column, measured in the same run, does less per task (no audit trail, no delegation or token exchange, no downstream call) and costs less: docs/scaling.md, "Beside the hand-built peer", says where the difference goes.',
  'overhead-light':
    "the split in the row's note: pickup (commit → NOTIFY → fetch → claim), the exchange and downstream call inside each step, and the journal/progress/settle transactions around the steps, each a commit.",
  'overhead-load':
    'queueing for CPU: under the headline load the machine is saturated, so every transaction and exchange of the path waits for a core (and once the backlog grows, for a worker slot too). What would move it: the same CPU savings as the headline (queueing falls steeply below saturation), and a start rate limit that keeps the machine out of saturation.',
  'pg-by-workers':
    "the same work spread over more processes on two cores: split by session (each row's note), what grows is the workers' pools, whose statements read no more buffers per task with 8 workers than with 1 but each run colder and wait longer for a core; every ending's notification no longer wakes each worker (docs/scaling.md, \"Workers: flat in worker count\"). On a slow hour of this machine every process waits longer for a core, and each added worker process costs more of it (run (13): 24 %, where runs (12) and (16) measured 12 %).",
  'idle-workers':
    "each idle worker's fixed database traffic: its announcement (one upsert of app.workers every 5 s, which also reads the live workers) and its wait for the maintenance-leader lock (one round trip every 30 s, blocked in PostgreSQL); maintenance, pg-boss supervision and the re-announcement of unfetched work run in the leader only.",
  'peer-polls':
    'the polls share the two cores with the starts and the runs of the headline load, and the starts won the larger share as the task got cheaper; on their own (the Throughput rows) the gateway answers several times more. What would move it: cheaper polls — each is one statement (the revocation check, its rate-limit count and the task read) plus its share of a group commit — and cheaper tasks.',
  pickup:
    'the split in the row\'s note: the creating transaction, then COMMIT → NOTIFY → fetch → claim, then the claim\'s audit append under the chain lock; every part waits for a core when the machine is busy (see "Start → worker step start" below).',
  'audit-append':
    'one chain lock held from each append to its COMMIT, WAL flush included: group commit shares a hold among concurrent appends, so the rate follows the flush time and the CPU left (see "Audit appends" below).',
  'curve-0.2':
    "the maximum is the rate at which 2 workers on 2 cores complete tasks with every process on the same cores (not the faster rate the closed-loop connections start them at, which only grows a backlog), so even 20 % of it keeps a core busy part of the time (each task costs 30-odd ms of CPU in all). The row's note splits the p50: inside the steps beyond their sleeps (per step a boundary read and the downstream call, whose server verifies the token and commits its write; the first step also exchanges the delegation at the IdP), created → claimed (the start's own statement, its commit → NOTIFY → the worker's fetch, that fetch → the claim), then the journal and settle commits. Each part is a chain of process wake-ups that waits for a core behind other tasks' work; one task at a time (the light-load row) takes about 33 ms over its sleeps. What would move it is the CPU per task (the Tasks section) and fewer hops per task (docs/scaling.md, \"Where a task's latency goes under load\"), not a setting.",
  'curve-0.4': 'as at 20 %: queueing for the two cores grows with the offered rate.',
  'curve-0.6': 'as at 20 %: queueing for the two cores grows with the offered rate.',
  'curve-0.8': 'as at 20 %: queueing for the two cores grows with the offered rate.',
  'poll-ratio-2025':
    "the same work as the 2026 poll: the 2025-11-25 fast path reaches the same verb with the same checks (see the 2026 row); the row with TASKS_GET_FAST_PATH=off shows what the SDK's per-request server cost on top.",
  'poll-ratio-jobs':
    'the same work as the 2026 poll: a 2025-11-25 `tools/call` of get_job_status as the v1 SDK sends it takes its own fast path to the same dispatch.callTool the SDK\'s handler makes (docs/scaling.md, "Polls on every wire").',
  'volume-poll':
    "a poll is one statement that looks its task up by primary key, which does not grow with the table; the seeded runs follow the bulk seeding directly, while the server (if it autovacuums: the machine line says) works through the freshly written rows, and a poll's p50 is a few milliseconds, so a busy minute moves the ratio. Compare the gateway's CPU per poll in the empty and seeded runs of the log: the size of the database cannot change it.",
  'poll-ratio':
    'the work the baseline skips, in the same one round trip to PostgreSQL: the revocation check, the rate-limit count (an upsert, where the baseline only reads) and the read of the caller\'s own task with its status-read mark (a wider row to parse: every column of the task); then the status-read audit step (under the default a repeat poll finds its mark and writes nothing; under STATUS_READ_AUDIT=all it waits for a group commit) and the JSON-RPC/MCP envelope (see "Polls" below). Verified tokens are remembered (AUTH_TOKEN_CACHE_MS), so a poll no longer pays a signature check the baseline pays.',
};

/**
 * What limits the numbers above: the code paths each measurement exercises, and diagnostics
 * (per-process CPU from /proc, CPU profiles of the gateway under load: BENCH_PROFILE_DIR)
 * taken while writing this bench on the machine named above. Figures quoted here are
 * approximate; the tables above are this run's.
 */
const ANALYSIS: string[] = [
  '## What limits these numbers',
  '',
  '**The machine.** Two cores run everything: autocannon, the gateway, the IdP, the downstream,',
  'the workers and PostgreSQL, plus whatever else the machine is doing (each CPU note says how',
  'much of the machine went to processes outside the bench). The steadier figure is the **CPU',
  'ms per request** in each note, measured per process from /proc: at 100 % of 2 cores, a',
  'request costing C ms of CPU in total cannot exceed 2000 / C per second, whatever the tuning.',
  'Shared cores also inflate the CPU per request itself (the same code measured 1.5–2× more',
  'CPU per start while other test runs shared the machine), so compare a result with the',
  'baseline of the same run, never with another run.',
  '',
  '**The task as a whole (the Tasks section).** The headline is what a deployment of this size',
  'sustains: starts while the workers run every task started, so the start path, the run path and',
  'the pollers share the two cores. At 100 % of 2 cores a completed task costing C ms of CPU (the',
  'per-phase table) cannot be sustained faster than 2000 / C per second, polls and the load',
  'generator not counted: 100 starts/s with completions keeping up needs at most 20 ms per task,',
  'and the goal of 15 ms leaves room for the polls. The figure to watch across changes is therefore the CPU',
  'per completed task and its split. In runs while writing this bench (machine shared) a 2-step',
  'task cost about 40 ms: the start request about 9 (gateway 4–5, IdP 1.5 for the delegation,',
  'PostgreSQL 3), pickup + settle about 12 (PostgreSQL 7–8, worker 3–4), each step about 8',
  '(worker 3, IdP 1.5–2 for its token exchange, downstream 1, PostgreSQL 2.5–3) and the result',
  'read about 3.5. PostgreSQL is the largest single share (about 17 of the 40 ms), and its',
  'largest item is pickup + settle: the claim and `task.started` event, the result row, the',
  'completion with its `task.completed` event, the pg-boss job completion, each its own',
  "transaction and WAL flush. Next come the worker's own CPU per step and the token exchange per",
  'step (an IdP round trip in which the IdP verifies two tokens and signs one, plus the audit',
  'event it leaves). The counts under the table say what the database does for one task: ten',
  'chained audit events and about ten updates of the task row (claim, lease renewals at each',
  'boundary, progress per step, settle), each in a transaction of its own, most of them',
  'committing with an audit event. Sampling pg_stat_activity while workers drained a batch',
  '(a diagnostic taken while writing this bench, not part of the run) found the active',
  'backends waiting far more than computing, and mostly on one thing: the audit chain lock',
  '(`audit.append` inside the claim, journal and settle transactions holds it to COMMIT, WAL',
  'flush included), about two thirds of all samples, then the per-tenant cap lock of the',
  'starts. That does not cost CPU, but it serialises the run path: it is what the overhead',
  'rows and a growing backlog show first.',
  '',
  '**Start → completed overhead.** The note under each overhead row splits it: created →',
  'claimed (the pickup row below: commit, NOTIFY, fetch, claim), the time inside the steps',
  "beyond the tool's own sleep (the boundary check, the token exchange and the downstream call),",
  'and the time between steps and after the last (journal + audit per step, progress, then',
  'result, completion and job). Under the headline load the same path queues for CPU: the',
  'overhead there is mostly waiting for a core, and grows without bound once the backlog does.',
  '',
  '**Starts with no worker running (a diagnostic) vs `send()`.** The baseline is one',
  'pg-boss INSERT in autocommit. A start through the gateway is: the MCP request through the',
  'v2 SDK (a server per request, schema validation, web `Request` conversion), ES256',
  'verification of the bearer token, the revocation check, the rate limits, a dedupe lookup,',
  'an RFC 8693 token exchange with the IdP for the task-bound delegation (an HTTP round trip in',
  'which the IdP verifies one token and signs another), then one transaction: INSERT the task,',
  'the per-tenant cap (advisory lock + the kept active counts, raised at commit), the pg-boss job INSERT (the',
  "baseline's whole work), the encrypted delegation INSERT, NOTIFY, two chained audit events",
  '(`task.created`, `task.delegated`, one `append_many` statement) and COMMIT. On a quiet',
  'machine that is about 6 ms of gateway CPU, 2 ms of IdP CPU and 5 ms of PostgreSQL CPU per',
  'start against about 1.6 ms in all for a send, so two cores top out near 145 starts/s; a',
  'ratio of 0.5 would need a start to cost no more than two sends, a fourfold cut. What was cut (PostgreSQL CPU',
  "per start 7–8 ms → 5 ms): hot statements are prepared, pg-boss's own parameterized SQL",
  'included (planning cost PostgreSQL more than running: the job INSERT alone went from about',
  '1.2 ms to 0.6 ms; the baseline is pg-boss as shipped, unprepared), the rate-limit table is',
  'UNLOGGED, the two audit events share one statement. What remains is what a start is for:',
  'authentication, a delegated credential, a durable job and a tamper-evident record, each a',
  'real round trip. Serialisation',
  'on top of the CPU: the audit chain lock is held from the append to COMMIT (one NOTIFY and',
  "the commit's WAL flush), and the per-tenant cap lock serialises the starts of one tenant (the",
  'bench spreads 32 users over 8 tenants and raises the caps so they never refuse).',
  '',
  '**Polls vs Express + jose + SELECT (goal ratio ≥ 0.5).** A conforming 2026-07-28 `tasks/get`',
  'is answered by the gateway\'s own path (docs/architecture.md, "The polling fast path"): no',
  'SDK server, no web `Request`, same answer (a test compares both paths). That cut the',
  "gateway's CPU per poll from about 1.7–2 ms to 0.6–1 ms. PostgreSQL's share fell from about",
  '1.3 ms to 0.5 ms per poll: prepared statements, the UNLOGGED rate-limit table, and group',
  'commit for the `task.status_read` events (concurrent polls share one chain-lock hold and one',
  'WAL flush instead of queueing one commit each). Since STATUS_READ_AUDIT (default',
  '`first-per-change`), a poll of a status its caller has already read appends nothing: its',
  "audit step is answered by the task's read itself, which says whether the caller's mark in",
  'app.status_read_marks for the current status exists: no statement of its own, no WAL and no',
  'commit to wait for; the `all` row measures',
  'every read appended, as every poll was before. The gap left to the baseline is the work the baseline skips: the revocation',
  'check and the rate-limit count (one statement since this release, the poll counted in the',
  "revocation check's round trip), the audit step and the JSON-RPC/MCP envelope. The gateway",
  "profile's largest single item is socket writes (two round trips to PostgreSQL per poll,",
  'three before this release, against one in the baseline), a share the profile overstates:',
  'it samples wall time, and a write that wakes a backend often gets the gateway preempted',
  'inside the system call (docs/scaling.md, "The cost of one task").',
  'In quiet runs with every read appended (before STATUS_READ_AUDIT) the ratio landed at',
  '0.46–0.51, on the goal line, and 0.54–0.59 with status reads unaudited. The machine is not',
  'CPU-bound meanwhile (about 80 % busy): a poll whose read is recorded waits for the commit of',
  'its `task.status_read` event before it answers, because an audit trail that answers first',
  'could lose the record of a read it served. Group commit shares that wait among concurrent',
  'polls; the default policy leaves it to the first read of each status.',
  '',
  '**Start → worker step start (goal p50 ≤ 20 ms).** The split in the note shows where it goes:',
  "a few ms inside the creating transaction, then COMMIT → NOTIFY → the worker's pg-boss fetch",
  "and claim, then the claim's own audit append. On a quiet machine p50 is 13–17 ms; other work",
  'on the same two cores pushes it to around 20 ms. pg-boss polling (the baseline) takes a few',
  'hundred milliseconds for the same pickup.',
  '',
  '**Audit appends (goal ≥ 2,000/s).** The chain has one lock, held from an append to its',
  "transaction's COMMIT, so one event per commit is strictly serial: 8 writers append no faster",
  'than one, and each hold includes a WAL flush (the baseline and diagnostic rows). Events',
  "appended outside a caller's transaction go through the pool's group commit",
  '(packages/audit/src/group-commit.ts): while one group commits, the next queues, and goes in',
  'one `audit.append_many` statement — one lock hold and one flush for the lot, each caller',
  'still answered only after its event is durable. Events that belong to a transaction (a',
  "task's creation, a step's journal entry) still commit with it.",
  '',
  '**Verification (goal ≥ 50,000/s).** `audit:verify` streams the chain from PostgreSQL and',
  'recomputes SHA-256 over every event in Node, checking links, gaps and query columns. Each',
  'row is checked as it arrives (no batches held, so little garbage collection) and the cursor',
  'is read with row-limited Execute messages rather than FETCH (which makes PostgreSQL',
  'materialise every batch): about 170,000 events/s here with a core to itself, 57,000 and up',
  'with the machine shared, in about 120–150 MB of memory whatever the length of the chain.',
  '',
  '**Scaling by worker count.** The same batch of tasks, started with the workers frozen, is run',
  'by 1, 2, 4 and 8 worker processes with the same 24 slots in all, so the PostgreSQL CPU per',
  'task should not depend on how the slots are split. It used to grow with the process count,',
  'because the cost was per process: every worker was woken by every start notification and',
  'fetched, ran its own pg-boss supervision and maintenance, and polled its queues. Now one',
  'agreed worker fetches per notification, one leader runs maintenance and supervision, and the',
  'poll is a 30 s safety net (docs/scaling.md); what is left per worker is its announcement',
  'every 5 s and its wait for the leader lock (one round trip every 30 s), which the idle row',
  'measures. What still grows under load was measured by backend (docs/scaling.md, "Workers"):',
  "the workers' statement sessions, colder when the same statements are spread over more of",
  'them, and less batching of fetches and appends with fewer slots per worker (a completed',
  "task's job is completed in its own ending's statement, however many workers). More processes",
  'do not add cores here either: at 8 workers the processes compete',
  'for the same two cores.',
  '',
  "**Memory.** 200 polling connections grow the gateway's resident set above idle (V8 sizes its",
  'heap to 200 requests in flight) and it does not give it back at once. That is heap sizing,',
  'not a leak: test/fuzz checks that the heap returns to the same size over repeated rounds of',
  'concurrent polls and hostile requests. The workers stay near idle size.',
  '',
  "**Failover.** SIGKILL → resumed is the lease (WORKER_LEASE_MS, 4 s) + the reaper's 0.5 s",
  "grace and 1 s tick + pg-boss's 1 s retry delay + the next fetch, minus whatever part of the",
  'lease had already run down when the worker died: under the 10 s goal; the chaos suite',
  'measures the same under a kill every ~3 s. Cancel and revocation are pushed to the running',
  'worker (LISTEN/NOTIFY) and stay well under their goals.',
  '',
  '## Database failover (`npm run test:failover`)',
  '',
  'Not written by `npm run bench`: measured by test/chaos/database-failover.test.ts, two',
  'PostgreSQL 15 nodes under Patroni (synchronous_mode, leader TTL 10 s) behind HAProxy, the',
  'stack reaching the database only through HAProxy, ~5 starts/s on the three wires with polls',
  'and audit appends; 5 leader-node kills (Patroni and postmaster, SIGKILL) and 5 `patronictl',
  'switchover`s in one run, on this shared 2-core machine (noisy). See',
  'docs/operations-resilience.md, "Database failover".',
  '',
  '| measure | kill (median / max of 5) | switchover (median / max of 5) |',
  '|---|---|---|',
  '| fault → new leader | 9.5 s / 10.3 s | 3.0 s / 3.3 s |',
  '| RTO: fault → first start accepted | 9.8 s / 10.6 s | 4.5 s / 4.9 s |',
  '| fault → every worker journaling again | 10.6 s / 10.9 s | 5.4 s / 5.8 s |',
  '| acknowledged tasks lost / duplicated | 0 / 0 | 0 / 0 |',
  '| acknowledged audit events lost / duplicated | 0 / 0 | 0 / 0 |',
  '| 5xx other than 503 (starts and polls) | 0 | 0 |',
  '',
  'Over the ten: 1,153 starts acknowledged, all completed once; 414 starts and 327 polls',
  'answered 503, 4 starts in-band `unavailable`; 10 checkpoints signed before the failovers all',
  'verify afterwards.',
  '',
  '## Product faults found by the chaos and fuzz suites, all fixed',
  '',
  '`npm run chaos` (test/chaos) and test/fuzz found these; each has a regression test there:',
  '',
  '- A worker SIGKILLed between claiming a task and appending `task.started` left the task with',
  '  no `task.started` event: the claim and its event now commit together.',
  '- SIGTERM to a worker cut the step in flight: the drain now lets the step finish and be',
  '  journaled, then releases the job.',
  '- A PostgreSQL restart killed worker processes (an `error` event of a checked-out pg client',
  '  was uncaught): every pooled client now has its own listener; the gateway answers 503 with',
  '  Retry-After while the database is down.',
  '- SIGTERM to the gateway kept serving new requests on open keep-alive connections for the',
  '  whole drain: a draining gateway now closes idle connections every 100 ms and answers a',
  '  request that still arrives with `Connection: close` (no 5xx, a drain of milliseconds).',
  "- U+0000 or lone surrogates in tool arguments, an idempotency key, or a trusted token's",
  '  `sub`/`tenant`/`client_id` reached PostgreSQL and came back as HTTP 500 or -32603.',
  "- On the legacy (2025-11-25) wire, params that fail the SDK's request schema were answered",
  '  -32603 with a zod issue dump: now -32602 with a one-line reason.',
  '- During a switchover, a pooled connection left on the demoted primary got `25006` (read-only',
  '  transaction), answered -32603 Internal error and HTTP 500, and went back to the pool: it is',
  '  now an outage (503 / `unavailable`) and the pool ends such a connection.',
  '- A worker cut off from PostgreSQL could go on writing downstream after its lease ran out',
  '  while the worker that took over wrote too: it now stops at a local lease deadline.',
  '- A gateway cut off by a partition hung on every verb (no answer, not even an error): it now',
  '  answers 503 within 10 s (query timeout), `/readyz` within 2 s.',
  '',
];
