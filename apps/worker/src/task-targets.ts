import type { TaskRow } from '@mtg/tasks';
import type { ReadDelegation, TaskCredentialDeps, TaskTargets } from '@mtg/runner';
import { createTaskCredentials } from '@mtg/runner';
import {
  createTargetClient,
  type DownstreamResilience,
  type LongToolDefinition,
  type TargetConfig,
} from '@mtg/tools';

/**
 * The targets of one task: for each target the tool uses, its own short-lived credentials
 * (exchanged for that target's audience, `sub` = the owner, `act` = this worker) and the
 * target's resilience policy, shared by every task of this process.
 */
export function createTaskTargets(deps: {
  credentials: TaskCredentialDeps;
  targets: ReadonlyMap<string, TargetConfig>;
  resilience: ReadonlyMap<string, DownstreamResilience>;
  /** The fetch each target's client uses (observed for metrics); default: the global one. */
  fetchFor?: (target: string) => typeof fetch;
}) {
  return (task: TaskRow, tool: LongToolDefinition, delegation?: ReadDelegation): TaskTargets => {
    const credentials = new Map<string, ReturnType<typeof createTaskCredentials>>();
    return {
      client(name, hooks) {
        const target = deps.targets.get(name);
        const resilience = deps.resilience.get(name);
        if (!target || !resilience) {
          // The worker checked at start that every declared target is configured.
          throw new TypeError(`target ${name} is not configured on this worker (TARGETS_FILE)`);
        }
        const c = createTaskCredentials(
          deps.credentials,
          task,
          { name, audience: target.audience, scopes: target.scopes ?? [tool.scope] },
          delegation,
        );
        credentials.set(name, c);
        return createTargetClient({
          name,
          baseUrl: target.url,
          taskId: task.id,
          token: () => c.token(),
          signal: hooks.signal,
          beforeCall: hooks.beforeCall,
          resilience,
          ...(deps.fetchFor ? { fetch: deps.fetchFor(name) } : {}),
        });
      },
      beginStage() {
        for (const c of credentials.values()) c.beginStage();
      },
    };
  };
}
