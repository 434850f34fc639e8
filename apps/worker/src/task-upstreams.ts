import type { Pool } from 'pg';
import { appendAuditGrouped } from '@mtg/audit';
import type { ReadDelegation, TaskCredentialDeps, TaskUpstreams } from '@mtg/runner';
import { createTaskCredentials, StopRun } from '@mtg/runner';
import type { TaskRow } from '@mtg/tasks';
import type { LongToolDefinition } from '@mtg/tools';
import { ToolError, type UpstreamTaskClient } from '@mtg/tool-kit';
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
  return (task: TaskRow, tool: LongToolDefinition, delegation?: ReadDelegation): TaskUpstreams => {
    const credentials = new Map<string, ReturnType<typeof createTaskCredentials>>();
    return {
      client(name, hooks) {
        const upstream = deps.upstreams.get(name);
        const guard = deps.guards.get(name);
        if (!upstream || !guard) {
          throw new TypeError(`upstream ${name} is not configured on this worker (UPSTREAMS_FILE)`);
        }
        const scope = upstreamScopeFor(upstream, tool);
        // The gateway narrows a task's delegation to its tool's scope (obtainDelegation): an
        // exchange can never ask for more, so a scope the tool does not have is refused here,
        // before anything is exchanged, rather than asked of the IdP.
        const held = [tool.scope];
        if (!held.includes(scope)) {
          const refusal = new ToolError(
            'upstream_scope_missing',
            `upstream ${name} requires scope ${scope}, which this task's delegation does not hold (it holds ${held.join(' ')})`,
          );
          return refusedUpstream(name, refusal, () =>
            appendAuditGrouped(deps.pool, {
              type: 'task.denied',
              taskId: task.id,
              tenant: task.tenant,
              subject: task.subject,
              client: task.client,
              tool: task.tool,
              reason: 'upstream_scope_missing',
              correlationId: task.correlation_id,
              actor: { subject: deps.workerId, kind: 'worker' },
              data: { verb: 'upstream', upstream: name, scope, held },
            }).then(() => {}),
          );
        }
        const c = createTaskCredentials(
          deps.credentials,
          task,
          { name: `upstream:${name}`, audience: upstream.audience, scopes: [scope] },
          delegation,
        );
        credentials.set(name, c);
        return createTaskUpstreamClient({
          upstream,
          guard,
          token: () => c.token(),
          invalidate: () => c.invalidate(),
          signal: hooks.signal,
          stopEndsTask: () => {
            const reason: unknown = hooks.signal.reason;
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

/**
 * The scope an upstream's configuration requires of a call: for one of the upstream's own
 * tools its configured scope (`tools.<name>.scope`, else the upstream's), which is that
 * tool's scope; for a pack's tool the upstream's `scope`.
 */
function upstreamScopeFor(upstream: UpstreamConfig, tool: LongToolDefinition): string {
  return tool.origin?.pack === `upstream:${upstream.name}` ? tool.scope : upstream.scope;
}

/**
 * The client of an upstream this task may not call: every request is refused with the
 * ToolError (the task ends with it, not retried), after the denial is audited once.
 */
function refusedUpstream(
  name: string,
  refusal: ToolError,
  audit: () => Promise<void>,
): UpstreamTaskClient {
  let audited: Promise<void> | undefined;
  const refuse = async (): Promise<never> => {
    audited ??= audit();
    await audited;
    throw refusal;
  };
  return {
    name,
    createTask: refuse,
    getTask: refuse,
    taskResult: refuse,
    question: refuse,
    answer: refuse,
    cancelTask: refuse,
    callTool: refuse,
    release: async () => {},
  };
}
