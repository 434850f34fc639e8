import pg from 'pg';
import { createTestDatabase, type TestDatabase } from '../../../test/support/database.ts';
import { pollUntil } from '../../../test/support/poll.ts';
import { createTaskEvents, type TaskEvents } from '../src/task-events.ts';

// task-events.ts: an on-demand channel is LISTENed to only while a listener of the process
// wants it (before PostgreSQL 19 every NOTIFY wakes every session that listens to anything),
// and a waiter that awaited `heard` hears what is notified after. The server says what the
// connection listens to (`pg_listening_channels()`).
const SETTLED = 'mtg_task_settled';
const CREATED = 'mtg_task_created';

let db: TestDatabase;
let notifier: pg.Client;
let events: TaskEvents;
beforeAll(async () => {
  db = await createTestDatabase({ migrate: false });
  notifier = new pg.Client({ connectionString: db.url });
  await notifier.connect();
  events = await createTaskEvents(db.url, [CREATED], undefined, {
    onDemand: [SETTLED],
    lingerMs: 50,
  });
});
afterAll(async () => {
  await events?.close();
  await notifier?.end();
  await db?.drop();
});

const notify = (taskId: string) =>
  notifier.query('SELECT pg_notify($1, $2)', [SETTLED, JSON.stringify({ taskId })]);
const listeningTo = (expected: string[]) =>
  pollUntil(
    () => events.listening(),
    (channels) => channels.join() === expected.join(),
    10_000,
    10,
  );

test('an on-demand channel is listened to from its first listener until a while after its last', async () => {
  expect(await events.listening()).toEqual([CREATED]);

  const first = new AbortController();
  const second = new AbortController();
  const waits = [
    events.waitForSettled('t-1', 60_000, SETTLED, first.signal),
    events.waitForSettled('t-2', 60_000, SETTLED, second.signal),
  ];
  await events.heard(SETTLED);
  expect(await events.listening()).toEqual([CREATED, SETTLED]);

  // One waiter gone: the other still keeps the channel.
  first.abort();
  await new Promise((resolve) => setTimeout(resolve, 150));
  expect(await events.listening()).toEqual([CREATED, SETTLED]);

  // The last gone: the channel is let go after the linger.
  second.abort();
  expect(await Promise.all(waits)).toEqual([false, false]);
  await listeningTo([CREATED]);
});

test('a waiter that awaited heard() hears the ending notified after; the channel is let go again', async () => {
  await listeningTo([CREATED]);
  const settled = events.waitForSettled('t-3', 60_000, SETTLED);
  await events.heard(SETTLED);
  await notify('t-3');
  expect(await settled).toBe(true);
  await listeningTo([CREATED]);
});

test('a channel listened to from the start stays, with or without listeners', async () => {
  const off = events.on(CREATED, () => {});
  off();
  await new Promise((resolve) => setTimeout(resolve, 150));
  expect(await events.listening()).toEqual([CREATED]);
});

test('after the connection is cut, the reconnect listens again to what is wanted', async () => {
  const settled = events.waitForSettled('t-4', 60_000, SETTLED);
  await events.heard(SETTLED);
  await notifier.query(
    `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
      WHERE datname = current_database() AND application_name = 'task-events'`,
  );
  await listeningTo([CREATED, SETTLED]);
  await notify('t-4');
  expect(await settled).toBe(true);
});
