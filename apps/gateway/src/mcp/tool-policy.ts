import { appendAuditGrouped } from '@mtg/audit';
import type { Pool } from '@mtg/db';
import type { Principal } from '@mtg/identity';
import type { Policy, Workload } from '@mtg/policy';

/** The per-tool policy as dispatch uses it: a filter for tools/list, a gate for tools/call. */
export interface ToolPolicy {
  /** Whether the caller may see (and so call) `tool`. No workload: nothing (fail closed). */
  permits(principal: Principal, workload: Workload | undefined, tool: string): boolean;
  /**
   * Whether the call may go ahead; a refusal is audited (`reason: policy_denied`) before
   * this returns, and the caller answers exactly as for an unknown tool.
   */
  admit(call: {
    tool: string;
    long: boolean;
    principal: Principal;
    workload: Workload | undefined;
    correlationId: string;
    wire: string;
  }): Promise<boolean>;
}

/** Whether the policy lets `workload` use `tool` for `principal`; no workload: never. */
export function policyPermits(policy: Policy): ToolPolicy['permits'] {
  return (principal, workload, tool) =>
    workload !== undefined && policy.decide(workload, tool, principal.scopes).allowed;
}

/**
 * The deployment's one tool policy object (build-gateway.ts): dispatch's filter and gate, the
 * task-scope step-up and the task verbs' guard all ask it.
 */
export function createToolPolicy(policy: Policy, db: Pool): ToolPolicy {
  return {
    permits: policyPermits(policy),
    async admit({ tool, long, principal, workload, correlationId, wire }) {
      const decision = workload
        ? policy.decide(workload, tool, principal.scopes)
        : ({ allowed: false, rule: 'no_workload', entry: null } as const);
      if (decision.allowed) return true;
      // A long tool's refusal is a refused task start (as a cap or scope refusal would be);
      // any other tool's is a plain authorization refusal.
      await appendAuditGrouped(db, {
        type: long ? 'task.denied' : 'auth.denied',
        tenant: principal.tenant,
        subject: principal.subject,
        client: principal.client,
        tool,
        reason: 'policy_denied',
        correlationId,
        data: {
          ...(long ? { verb: 'start' } : {}),
          wire,
          workload: workload ?? null,
          rule: decision.rule,
          entry: decision.entry,
          ...('missingScopes' in decision && decision.missingScopes
            ? { missingScopes: decision.missingScopes }
            : {}),
          policy: policy.source,
        },
      });
      return false;
    },
  };
}
