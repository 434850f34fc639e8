/**
 * What a query may see: always one tenant; a user only their own tasks (the subject of
 * their `task.created` events).
 */
export interface ReadScope {
  tenant: string;
  /** Set for the user role: only this subject's own tasks. */
  ownerOnly?: string;
}

/**
 * A denial's reason as a tenant may read it: `cross_tenant` (the probed id is another
 * tenant's task) reads `unknown_task`, or the reason would tell the tenant that an id leaked to
 * one of its users exists elsewhere. The gateway now writes `unknown_task` in the tenant's
 * chain itself (the distinction goes to chain 0); this covers the events written before.
 */
export const TENANT_REASON = `CASE reason WHEN 'cross_tenant' THEN 'unknown_task' ELSE reason END`;
