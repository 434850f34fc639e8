import { prepared, runPrepared } from '@mtg/db';
import { deny, type DenyDeps, type VerbContext } from './authorize-task.ts';
import { TASK_ID } from './task-id.ts';
import { OWNER_MATCH, RETAINED } from './task-state/predicates.ts';

const OWNED_TOOL = prepared(
  `SELECT tool FROM app.tasks WHERE id = $1 AND ${OWNER_MATCH} AND ${RETAINED}`,
);

/**
 * The scope an owner must add to its token to use one of its own tasks (docs/tasks.md, "Who
 * may do what"): the caller's retained task, of a tool the per-tool policy (if any) admits
 * for the calling workload, whose scope the token lacks. Then the denial is audited
 * (`task.denied`, `scope_missing`) and the gateway answers with the step-up challenge;
 * in every other case this returns undefined, audits nothing, and the verb itself decides
 * (a foreign, missing or policy-refused task stays the single not-found answer).
 */
export async function stepUpScope(
  deps: DenyDeps,
  taskId: string,
  verb: string,
  ctx: VerbContext,
  scopeOf: (tool: string) => string | undefined,
): Promise<{ tool: string; scope: string } | undefined> {
  if (!TASK_ID.test(taskId)) return undefined;
  const p = ctx.principal;
  const row = (
    await runPrepared<{ tool: string }>(deps.pool, OWNED_TOOL, [
      taskId,
      p.tenant,
      p.subject,
      p.client,
    ])
  ).rows[0];
  if (!row || (ctx.admitTool && !ctx.admitTool(row.tool))) return undefined;
  const scope = scopeOf(row.tool);
  if (!scope || p.scopes.includes(scope)) return undefined;
  await deny(deps, ctx, verb, taskId, 'scope_missing', row.tool);
  return { tool: row.tool, scope };
}
