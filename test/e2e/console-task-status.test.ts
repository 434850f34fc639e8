import { randomBytes } from 'node:crypto';
import { createPool, dropLoginRoles, loginUrl, provisionLoginRoles, ROLES } from '@mtg/db';
import { appendAuditGrouped } from '@mtg/audit';
import { searchTasks } from '../../apps/console/src/queries/search-tasks.ts';
import { adminDatabaseUrl, createTestDatabase, type TestDatabase } from '../support/database.ts';

// The console's task search tells a task's status from its audit trail: an upstream task
// that waits for input (task.input_required, mirrored while its worker keeps the lease) is
// input_required there, and working again once resolved.
let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db?.drop();
});

test('input_required and its resolution show in the console task search and its status filter', async () => {
  const writer = createPool({ connectionString: db.logins.worker, role: ROLES.worker });
  // The console's own kind of login: a member of mtg_console only.
  const login = {
    name: `${db.name}_console`,
    password: randomBytes(18).toString('base64url'),
    group: ROLES.console,
  };
  await provisionLoginRoles(db.url, [login]);
  const reader = createPool({ connectionString: loginUrl(db.url, login), role: ROLES.console });
  try {
    const about = { tenant: 'acme', subject: 'alice', client: 'mcp-agent', tool: 'demo.approve' };
    const append = (type: string, taskId: string) =>
      appendAuditGrouped(writer, {
        type: type as never,
        taskId,
        ...about,
        actor: { subject: 'worker-1', kind: 'worker' },
      });
    for (const t of ['waiting', 'resolved']) {
      await append('task.created', t);
      await append('task.started', t);
      await append('task.input_required', t);
    }
    await append('task.input_resolved', 'resolved');
    const all = await searchTasks(reader, { tenant: 'acme' }, {});
    const status = Object.fromEntries(all.map((t) => [t.task_id, t.status]));
    expect(status).toEqual({ waiting: 'input_required', resolved: 'working' });
    const filtered = await searchTasks(reader, { tenant: 'acme' }, { status: 'input_required' });
    expect(filtered.map((t) => t.task_id)).toEqual(['waiting']);
  } finally {
    await writer.end();
    await reader.end();
    await dropLoginRoles(adminDatabaseUrl(), [login.name]);
  }
});
