import { randomBytes } from 'node:crypto';
import { createPool, dropLoginRoles, loginUrl, provisionLoginRoles, ROLES } from '@mtg/db';
import { appendAuditGrouped } from '@mtg/audit';
import { TASK_STATUSES } from '@mtg/tool-kit';
import { searchTasks } from '../../apps/console/src/queries/search-tasks.ts';
import {
  LIFECYCLE_EVENTS,
  STATUS_EVENTS,
  statusOfEvents,
} from '../../apps/console/src/queries/task-status.ts';
import { adminDatabaseUrl, createTestDatabase, type TestDatabase } from '../support/database.ts';

// The console's task search tells a task's status from its audit trail: an upstream task
// that waits for input (task.input_required, mirrored while its worker keeps the lease) is
// input_required there, and working again once resolved. Its search (SQL) and its task page
// (statusOfEvents) come from one mapping keyed by TASK_STATUSES, in app.tasks' own words.
let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db?.drop();
});

test('the mapping gives every status its events, and each event one status', () => {
  for (const status of TASK_STATUSES) expect(STATUS_EVENTS[status].length).toBeGreaterThan(0);
  const listed = Object.values(STATUS_EVENTS).flat();
  expect(listed).toHaveLength(new Set(listed).size);
  expect([...LIFECYCLE_EVENTS].sort()).toEqual([...listed].sort());
});

const openReader = async () => {
  const writer = createPool({ connectionString: db.logins.worker, role: ROLES.worker });
  // The console's own kind of login: a member of mtg_console only.
  const login = {
    name: `${db.name}_console_${randomBytes(3).toString('hex')}`,
    password: randomBytes(18).toString('base64url'),
    group: ROLES.console,
  };
  await provisionLoginRoles(db.url, [login]);
  const reader = createPool({ connectionString: loginUrl(db.url, login), role: ROLES.console });
  return {
    writer,
    reader,
    close: async () => {
      await writer.end();
      await reader.end();
      await dropLoginRoles(adminDatabaseUrl(), [login.name]);
    },
  };
};

test('the search and the task page tell the same status for every lifecycle event, in app.tasks words', async () => {
  const { writer, reader, close } = await openReader();
  try {
    const about = { tenant: 'globex', subject: 'bob', client: 'mcp-agent', tool: 'demo.report' };
    const trails: Record<string, string[]> = {
      // Queued, and paused for a live owner (checkpoint mode): app.tasks says working and
      // input_required, not "submitted" or "paused".
      queued: ['task.created'],
      paused: ['task.created', 'task.started', 'task.paused'],
      resumed: ['task.created', 'task.started', 'task.paused', 'task.resumed'],
      ...Object.fromEntries(
        LIFECYCLE_EVENTS.map((e) => [e.replace('task.', ''), ['task.created', 'task.started', e]]),
      ),
    };
    for (const [taskId, types] of Object.entries(trails)) {
      for (const type of types)
        await appendAuditGrouped(writer, {
          type: type as never,
          taskId,
          ...about,
          actor: { subject: 'worker-1', kind: 'worker' },
        });
    }
    const found = await searchTasks(reader, { tenant: 'globex' }, {});
    const searched = Object.fromEntries(found.map((t) => [t.task_id, t.status]));
    const paged = Object.fromEntries(
      Object.entries(trails).map(([taskId, types]) => [taskId, statusOfEvents(types)]),
    );
    expect(searched).toEqual(paged);
    expect(searched).toMatchObject({
      queued: 'working',
      paused: 'input_required',
      resumed: 'working',
      completed: 'completed',
      admin_cancelled: 'cancelled',
    });
    for (const [status, events] of Object.entries(STATUS_EVENTS))
      for (const e of events) expect(searched[e.replace('task.', '')]).toBe(status);
  } finally {
    await close();
  }
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
