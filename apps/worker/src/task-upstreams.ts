import type { Pool } from 'pg';
import { appendAuditGrouped } from '@mtg/audit';
import type { TaskCredentialDeps, TaskUpstreams } from '@mtg/runner';
import { createTaskCredentials, StopRun } from '@mtg/runner';
import type { TaskRow } from '@mtg/tasks';
import type { LongToolDefinition } from '@mtg/tools';
import { createTaskUpstreamClient, type UpstreamConfig, type UpstreamGuard } from '@mtg/upstreams';

/**
 * The upstreams of one task, handed to its tool as `ctx.upstream(name)`: for each upstream
 * its own short-lived credentials (the task's delegation exchanged for the upstream's
 * audience, `sub` = the owner, `act` = this worker; each exchange a `task.identity_refreshed`
 * event naming `upstream:<name>`), the process's guard of that upstream, and the audit of
 * upstream task creation, cancellation and end.
 */
export function createTaskUpstreams(deps: {
  pool: Pool;
  credentials: TaskCredentialDeps;
  upstreams: ReadonlyMap<string, UpstreamConfig>;
  guards: ReadonlyMap<string, UpstreamGuard>;
  workerId: string;
}) {
  return (task: TaskRow, tool: LongToolDefinition): TaskUpstreams => {
    const credentials = new Map<string, ReturnType<typeof createTaskCredentials>>();
    return {
      client(name, hooks) {
        const upstream = deps.upstreams.get(name);
        const guard = deps.guards.get(name);
        if (!upstream || !guard) {
          throw new TypeError(`upstream ${name} is not configured on this worker (UPSTREAMS_FILE)`);
        }
        const c = createTaskCredentials(deps.credentials, task, {
          name: `upstream:${name}`,
          audience: upstream.audience,
          scopes: [tool.scope],
        });
        credentials.set(name, c);
        return createTaskUpstreamClient({
          upstream,
          guard,
          token: () => c.token(),
          invalidate: () => c.invalidate(),
          signal: hooks.signal,
          stopEndsTask: () => {
            const reason = hooks.signal.reason;
            return (
              reason instanceof StopRun &&
              (reason.reason === 'cancel' ||
                reason.reason === 'revoked' ||
                reason.reason === 'deadline')
            );
          },
          beforeCall: hooks.beforeCall,
          audit: (type, data) =>
            appendAuditGrouped(deps.pool, {
              type,
              taskId: task.id,
              tenant: task.tenant,
              subject: task.subject,
              client: task.client,
              tool: task.tool,
              correlationId: task.correlation_id,
              actor: { subject: deps.workerId, kind: 'worker' },
              data,
            }).then(() => {}),
        });
      },
      beginStage() {
        for (const c of credentials.values()) c.beginStage();
      },
    };
  };
}
