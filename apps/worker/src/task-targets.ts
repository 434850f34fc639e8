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
  // The targets each tool's runs have called on this process: a stage of a later run
  // exchanges for them when it begins (prefetch), not at its first call.
  const calledBy = new Map<string, Set<string>>();
  return (task: TaskRow, tool: LongToolDefinition, delegation?: ReadDelegation): TaskTargets => {
    const credentials = new Map<string, ReturnType<typeof createTaskCredentials>>();
    const called = calledBy.get(tool.name) ?? new Set<string>();
    calledBy.set(tool.name, called);
    const credentialsOf = (name: string) => {
      let c = credentials.get(name);
      if (c) return c;
      const target = deps.targets.get(name);
      if (!target) {
        // The worker checked at start that every declared target is configured.
        throw new TypeError(`target ${name} is not configured on this worker (TARGETS_FILE)`);
      }
      c = createTaskCredentials(
        deps.credentials,
        task,
        { name, audience: target.audience, scopes: target.scopes ?? [tool.scope] },
        delegation,
      );
      credentials.set(name, c);
      return c;
    };
    return {
      client(name, hooks) {
        const resilience = deps.resilience.get(name);
        const c = credentialsOf(name);
        if (!resilience) {
          throw new TypeError(`target ${name} is not configured on this worker (TARGETS_FILE)`);
        }
        return createTargetClient({
          name,
          baseUrl: deps.targets.get(name)!.url,
          taskId: task.id,
          token: () => {
            called.add(name);
            return c.token();
          },
          signal: hooks.signal,
          beforeCall: hooks.beforeCall,
          resilience,
          ...(deps.fetchFor ? { fetch: deps.fetchFor(name) } : {}),
        });
      },
      beginStage() {
        for (const c of credentials.values()) c.beginStage();
      },
      prefetch() {
        // Only targets this tool's runs called before: a tool that calls a target only now
        // and then exchanges for it at its call, as it did before any run had called it.
        if (called.size === 0) return undefined;
        return Promise.all([...called].map((name) => credentialsOf(name).prefetch())).then(
          () => {},
        );
      },
    };
  };
}
