-- The maintenance leader reaps the leases of dead workers every second
-- (packages/tasks/src/task-state/lease.ts, reapExpiredLeases): active tasks whose lease
-- lapsed. It found them through the index of active tasks, reading every active row's heap
-- to look at its lease, so its cost grew with the tasks waiting for a worker, not with the
-- few that are leased: with a backlog of 50,000 queued tasks one sweep read 24,589 heap pages
-- and took 2.3 s. This index holds only the leased active tasks (at most the workers' slots).
-- Its predicate names lease_owner, so a claim (which sets it) is no longer a HOT update; the
-- lease's renewals change neither lease_owner nor status and stay HOT.
CREATE INDEX tasks_leased ON app.tasks (id)
  WHERE lease_owner IS NOT NULL AND status IN ('working', 'input_required');
