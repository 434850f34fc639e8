import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { appendAuditInTransaction, type AuditEvent } from '../../src/index.ts';

/** A plausible event of a task lifecycle, the n-th of a run. */
export function sampleEvent(n: number, tenant = 'acme', subject = 'nia'): AuditEvent {
  const taskId = randomBytes(16).toString('hex');
  const kinds: AuditEvent[] = [
    {
      type: 'task.created',
      taskId,
      tenant,
      subject,
      client: 'mcp-agent',
      tool: 'generate_report',
      correlationId: `c-${n}`,
      data: { wire: 'v2', arguments: { report: `r${n}` } },
    },
    {
      type: 'task.started',
      taskId,
      tenant,
      subject,
      client: 'mcp-agent',
      tool: 'generate_report',
      actor: { subject: 'worker-1', kind: 'worker' },
      data: { worker: 'worker-1', epoch: 1 },
    },
    {
      type: 'task.status_read',
      taskId,
      tenant,
      subject,
      client: 'mcp-agent',
      tool: 'generate_report',
      data: { wire: 'v2', status: 'working', note: 'zoë ✓ 🚀' },
    },
    {
      type: 'task.denied',
      taskId,
      tenant,
      subject: 'eve',
      client: 'mcp-agent',
      reason: 'not_owner',
      data: { verb: 'get', wire: 'v1' },
    },
  ];
  return kinds[n % kinds.length]!;
}

/** Appends `count` sample events through audit.append as mtg_gateway, each in its own transaction. */
export async function appendSamples(url: string, count: number): Promise<void> {
  const client = new pg.Client({ connectionString: url, options: '-c role=mtg_gateway' });
  await client.connect();
  try {
    for (let i = 0; i < count; i++) await appendAuditInTransaction(client, sampleEvent(i));
  } finally {
    await client.end();
  }
}

/**
 * Appends `count` events quickly for volume tests: in server-side batches of 5000, each
 * batch one transaction calling audit.append per event.
 */
export async function appendBulk(url: string, count: number): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    for (let done = 0; done < count; done += 5000) {
      const n = Math.min(5000, count - done);
      await client.query(
        `SELECT count(audit.append('task.step_completed',
           '{"actor":{"kind":"worker","subject":"worker-1"},"client":"mcp-agent","correlationId":"' || md5(i::text || 'c') ||
           '","data":{"durationMs":' || i || ',"step":"deploy","worker":"worker-1"},"subject":"nia","taskId":"' || md5(i::text) ||
           '","tenant":"acme","tool":"provision_test_environment"}'))
         FROM generate_series($1::int, $2::int) i`,
        [done + 1, done + n],
      );
    }
  } finally {
    await client.end();
  }
}

/** Runs statements as the superuser with audit.events' append-only triggers off: a tamperer. */
export async function tamper(
  url: string,
  statements: string[],
  tables = ['audit.events'],
): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query('BEGIN');
    for (const t of tables) await client.query(`ALTER TABLE ${t} DISABLE TRIGGER USER`);
    for (const s of statements) await client.query(s);
    for (const t of tables) await client.query(`ALTER TABLE ${t} ENABLE TRIGGER USER`);
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {});
    throw error;
  } finally {
    await client.end();
  }
}
