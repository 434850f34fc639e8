import { nowMs } from '@mtg/clock';
import type pg from 'pg';
import { waitFor, type Answer, type StackClient } from './stack-client.ts';

export interface CheckResult {
  id: string;
  title: string;
  passed: boolean;
  summary: string;
  details: Record<string, unknown>;
  /** The audit events that prove it (type, reason, who, when), never bodies with data. */
  audit: Array<Record<string, unknown>>;
}

export interface CheckContext {
  stack: StackClient;
  db: pg.Client;
  /** The run's synthetic tenants (run-scope.ts): every event of the pass is in one of them. */
  tenants: { main: string; other: string };
}
const BULK = (n: number, tag: string) => ({ collection: `evidence-${tag}`, count: n, patch: { reviewed: true } });

async function auditFor(db: pg.Client, taskId: string, types?: string[]) {
  const r = await db.query(
    `SELECT seq, occurred_at, type, subject, tenant, client, reason FROM audit.events
      WHERE task_id = $1 ${types ? 'AND type = ANY($2)' : ''} ORDER BY occurred_at, chain_id, seq LIMIT 40`,
    types ? [taskId, types] : [taskId],
  );
  return r.rows;
}

const same = (a: Answer, b: Answer) => JSON.stringify(a) === JSON.stringify(b);

/** Other users, another tenant and another client cannot reach a task: answers equal a random id's. */
export async function crossPrincipalAccess({ stack, db, tenants }: CheckContext): Promise<CheckResult> {
  const owner = stack.unique('owner');
  const ownerToken = await stack.token(owner, tenants.main);
  const started = await stack.call(ownerToken, 'bulk_update_records', BULK(20_000, 'xp'));
  if (!started.ok) throw new Error(`start failed: ${started.error}`);
  const taskId = started.value.jobId as string;
  const strangers: Array<[string, string]> = [
    ['another user, same tenant', await stack.token(stack.unique('other'), tenants.main)],
    ['same user name, another tenant', await stack.token(owner, tenants.other)],
    ['same user, another client', await stack.token(owner, tenants.main, { client: 'mcp-agent-2' })],
  ];
  const rows: Array<Record<string, unknown>> = [];
  let passed = true;
  for (const [who, token] of strangers) {
    for (const verb of ['get_job_status', 'get_job_result', 'cancel_job']) {
      const foreign = await stack.call(token, verb, { jobId: taskId });
      const missing = await stack.call(token, verb, { jobId: stack.randomId() });
      const ok = !foreign.ok && same(foreign, missing);
      passed &&= ok;
      rows.push({ who, verb, denied: !foreign.ok, identicalToRandomId: same(foreign, missing), answer: foreign.ok ? 'ALLOWED' : foreign.error });
    }
  }
  const ownerView = await stack.call(ownerToken, 'get_job_status', { jobId: taskId });
  passed &&= ownerView.ok;
  await stack.call(ownerToken, 'cancel_job', { jobId: taskId });
  return {
    id: 'cross-principal-access',
    title: 'Cross-user, cross-tenant and cross-client access is denied, indistinguishably from a missing task',
    passed,
    summary: `${rows.filter((r) => r.denied && r.identicalToRandomId).length}/${rows.length} probes denied with the not-found answer; the owner still reads the task`,
    details: { taskId, probes: rows },
    audit: await auditFor(db, taskId, ['task.created', 'task.denied']),
  };
}

/** Twenty identical starts make one task. */
export async function identicalStarts({ stack, db, tenants }: CheckContext): Promise<CheckResult> {
  const token = await stack.token(stack.unique('storm'), tenants.main);
  const args = { report: stack.unique('evidence-report'), rows: 10 };
  const answers = await Promise.all(Array.from({ length: 20 }, () => stack.call(token, 'generate_report', args)));
  const ids = new Set(answers.map((a) => (a.ok ? a.value.jobId : `error:${a.error}`)));
  const [taskId] = [...ids];
  const audit = taskId ? await auditFor(db, taskId, ['task.created', 'task.deduplicated']) : [];
  const created = audit.filter((e) => e.type === 'task.created').length;
  return {
    id: 'twenty-identical-starts',
    title: 'Twenty identical concurrent starts create exactly one task',
    passed: ids.size === 1 && created === 1,
    summary: `${ids.size} distinct task id(s); ${created} task.created event(s), ${audit.length - created} task.deduplicated`,
    details: { taskIds: [...ids] },
    audit,
  };
}

/** Guessing task ids yields nothing. */
export async function iteratingIds({ stack, tenants }: CheckContext): Promise<CheckResult> {
  const token = await stack.token(stack.unique('prober'), tenants.main);
  const answers = new Set<string>();
  for (let i = 0; i < 25; i++) answers.add(JSON.stringify(await stack.call(token, 'get_job_status', { jobId: stack.randomId() })));
  for (const guess of ['0'.repeat(32), '1', '../etc/passwd', "' OR 1=1 --"]) {
    answers.add(JSON.stringify(await stack.call(token, 'get_job_status', { jobId: guess })));
  }
  return {
    id: 'iterating-task-ids',
    title: 'Iterating or guessing task ids is indistinguishable from missing tasks',
    passed: answers.size === 1,
    summary: `${answers.size} distinct answer(s) to 29 guesses: ${[...answers][0]}`,
    details: { answers: [...answers] },
    audit: [],
  };
}

/** After cancel returns, no downstream write lands. */
export async function cancelThenWrites({ stack, db, tenants }: CheckContext): Promise<CheckResult> {
  const token = await stack.token(stack.unique('canceller'), tenants.main);
  const started = await stack.call(token, 'bulk_update_records', BULK(40_000, 'cancel'));
  if (!started.ok) throw new Error(`start failed: ${started.error}`);
  const taskId = started.value.jobId as string;
  await waitFor(() => stack.writes(taskId), (w) => w.length >= 2, 60_000);
  const t0 = nowMs();
  const cancelled = await stack.call(token, 'cancel_job', { jobId: taskId });
  const returnedAt = nowMs();
  const before = await stack.writes(taskId);
  await new Promise((r) => setTimeout(r, 5000));
  const after = await stack.writes(taskId);
  const late = after.filter((w) => Date.parse(w.at) > returnedAt);
  return {
    id: 'cancel-then-writes',
    title: 'After cancel returns, no further downstream write lands',
    passed: cancelled.ok && cancelled.value.status === 'cancelled' && after.length === before.length && late.length === 0,
    summary: `cancel took ${returnedAt - t0} ms and returned status ${cancelled.ok ? cancelled.value.status : cancelled.error}; ${before.length} writes before, ${after.length} five seconds later, ${late.length} after the return`,
    details: { taskId, cancelMs: returnedAt - t0, writesAtReturn: before.length, writesLater: after.length },
    audit: await auditFor(db, taskId, ['task.cancel_requested', 'task.cancelled', 'task.step_completed']),
  };
}

/** The creating token expires mid-run: 401 to polls, the work continues under the delegation. */
export async function tokenExpiryMidRun({ stack, db, tenants }: CheckContext, toleranceSeconds: number): Promise<CheckResult> {
  const user = stack.unique('expiring');
  const shortLived = await stack.token(user, tenants.main, { ttl: 3 });
  const started = await stack.call(shortLived, 'generate_report', { report: stack.unique('expiry'), rows: 5 });
  if (!started.ok) throw new Error(`start failed: ${started.error}`);
  const taskId = started.value.jobId as string;
  await new Promise((r) => setTimeout(r, (3 + toleranceSeconds + 1) * 1000));
  const poll = await stack.pollStatus(shortLived, taskId);
  const fresh = await stack.token(user, tenants.main);
  const final = await waitFor(() => stack.call(fresh, 'get_job_status', { jobId: taskId }), (a) => a.ok && a.value.status !== 'working', 120_000);
  const status = final.ok ? final.value.status : final.error;
  return {
    id: 'token-expiry-mid-run',
    title: 'The creating token expires mid-run: polls with it get 401; the task finishes under its delegation',
    passed: poll.status === 401 && status === 'completed',
    summary: `poll with the expired token: HTTP ${poll.status} (${poll.wwwAuthenticate}); task ended ${status}`,
    details: { taskId, pollStatus: poll.status },
    audit: await auditFor(db, taskId, ['task.created', 'task.delegated', 'task.identity_refreshed', 'task.completed']),
  };
}

/** Disabling the user mid-run (a real SET from the IdP) stops the task at the next boundary. */
export async function userDisabledMidRun({ stack, db, tenants }: CheckContext): Promise<CheckResult> {
  const user = stack.unique('disabled');
  const token = await stack.token(user, tenants.main);
  const started = await stack.call(token, 'bulk_update_records', BULK(40_000, 'disable'));
  if (!started.ok) throw new Error(`start failed: ${started.error}`);
  const taskId = started.value.jobId as string;
  await waitFor(() => stack.writes(taskId), (w) => w.length >= 1, 60_000);
  const t0 = nowMs();
  await stack.idpUser('disable', user, tenants.main);
  const row = await waitFor(
    async () => (await db.query('SELECT status, outcome, ended_at FROM app.tasks WHERE id = $1', [taskId])).rows[0],
    (r) => r.status !== 'working',
    30_000,
    50,
  );
  const stopMs = row.ended_at ? new Date(row.ended_at).getTime() - t0 : undefined;
  await new Promise((r) => setTimeout(r, 3000));
  const writes = await stack.writes(taskId);
  const late = writes.filter((w) => row.ended_at && Date.parse(w.at) > new Date(row.ended_at).getTime());
  const poll = await stack.pollStatus(token, taskId);
  await stack.idpUser('enable', user, tenants.main);
  const principal = await db.query(
    `SELECT seq, occurred_at, type, subject, tenant, reason FROM audit.events
      WHERE tenant = $1 AND subject = $2 AND type LIKE 'principal.%' ORDER BY occurred_at, chain_id, seq`,
    [tenants.main, user],
  );
  return {
    id: 'user-disabled-mid-run',
    title: 'A user disabled mid-run (Shared Signals from the IdP): the task stops at its next boundary, nothing is written after',
    passed: row.status === 'cancelled' && row.outcome === 'revoked' && late.length === 0 && poll.status === 401,
    summary: `task ${row.status}/${row.outcome} ${stopMs} ms after the disable; ${late.length} writes after it ended; the user's token then gets HTTP ${poll.status}`,
    details: { taskId, stopMs, writes: writes.length },
    audit: [...principal.rows, ...(await auditFor(db, taskId, ['task.cancel_requested', 'task.cancelled']))],
  };
}
