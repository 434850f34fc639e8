import { z } from 'zod';
import type { ApprovalView, TaskError, TaskService } from '@mtg/tasks';
import type { ToolContext, ToolDefinition, ToolResult } from '@mtg/tools';
import { toolErrorFor } from './dispatch.ts';

/**
 * Four-eyes approval as instant tools, on every wire alike: a principal lists the approvals
 * it may decide (open ones of its tenant, for scopes its token holds, on other people's
 * tasks) and approves or rejects one. The task service decides who may; these only shape.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- tools of different input types; each one's schema parses its arguments
export function approvalTools(tasks: TaskService): ToolDefinition<any>[] {
  const ctxOf = (c: ToolContext) => ({ ...c, wire: 'approval-tools' });
  const err = (e: TaskError): ToolResult => toolErrorFor(e);
  const line = (a: ApprovalView) =>
    `${a.taskId} ${a.tool} by ${a.owner.subject} (${a.scope}): ${a.reason} ${JSON.stringify(a.summary)}`;
  const taskId = z.string().min(1).max(200).describe('The taskId list_approvals showed');

  const listApprovals: ToolDefinition<Record<string, never>> = {
    name: 'list_approvals',
    title: 'List approvals',
    description:
      'Tasks of other people in your organisation that wait for an approval you may give (a scope your token holds): the tool, who asked, what and why.',
    inputSchema: z.object({}).strict(),
    async run(c) {
      const r = await tasks.approvals(ctxOf(c));
      if (!r.ok) return err(r);
      return {
        content: [
          { type: 'text', text: r.approvals.map(line).join('\n') || 'No approvals wait for you.' },
        ],
        structuredContent: { approvals: r.approvals },
      };
    },
  };

  const decide =
    (approved: boolean) =>
    async (c: ToolContext, args: { taskId: string; reason?: string }): Promise<ToolResult> => {
      const r = await tasks.decide(args.taskId, ctxOf(c), {
        approved,
        ...(args.reason ? { reason: args.reason } : {}),
      });
      if (!r.ok) return err(r);
      return {
        content: [
          {
            type: 'text',
            text: `${approved ? 'Approved' : 'Rejected'}: ${line(r.approval)}`,
          },
        ],
        structuredContent: { approved, approval: r.approval },
      };
    };

  const approveTask: ToolDefinition<{ taskId: string; reason?: string }> = {
    name: 'approve_task',
    title: 'Approve task',
    description: 'Approves a task that waits for your approval (see list_approvals); it goes on.',
    inputSchema: z.object({ taskId, reason: z.string().max(500).optional() }).strict(),
    run: decide(true),
  };
  const rejectTask: ToolDefinition<{ taskId: string; reason: string }> = {
    name: 'reject_task',
    title: 'Reject task',
    description: 'Rejects a task that waits for your approval; it ends with your reason.',
    inputSchema: z.object({ taskId, reason: z.string().min(1).max(500) }).strict(),
    run: decide(false),
  };
  return [listApprovals, approveTask, rejectTask];
}
