// Two ways to append, told apart by type: a client inside the caller's transaction, or a pool
// through group commit. Handing the pool to the transactional entry point (which would
// separate the event from the change it records) or a client to the grouped one does not
// compile; `npm run typecheck` checks the expectations below.
import type pg from 'pg';
import {
  appendAuditEventsInTransaction,
  appendAuditGrouped,
  appendAuditInTransaction,
  type AuditEvent,
} from '../src/index.ts';

const event: AuditEvent = { type: 'task.status_read', tenant: 'acme', subject: 'nia' };

// Never called: these lines are checked by the compiler only.
export function typeChecks(pool: pg.Pool, client: pg.PoolClient, session: pg.Client) {
  void appendAuditInTransaction(client, event);
  void appendAuditInTransaction(session, event);
  void appendAuditEventsInTransaction(client, [event]);
  void appendAuditGrouped(pool, event);
  // @ts-expect-error a pool is not the caller's transaction
  void appendAuditInTransaction(pool, event);
  // @ts-expect-error a pool is not the caller's transaction
  void appendAuditEventsInTransaction(pool, [event]);
  // @ts-expect-error a transaction's client is not a pool to group-commit on
  void appendAuditGrouped(client, event);
}

test('the two entry points are distinct functions, neither choosing by its argument', () => {
  expect(appendAuditInTransaction).not.toBe(appendAuditGrouped);
  // One parameter each besides the event: nothing to inspect but what its type allows.
  expect(appendAuditInTransaction.length).toBe(2);
  expect(appendAuditGrouped.length).toBe(2);
});
