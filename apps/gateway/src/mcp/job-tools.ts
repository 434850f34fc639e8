import { z } from 'zod';
import { RESULT_GONE, type TaskError, type TaskService, type TaskView } from '@mtg/tasks';
import type { ToolContext, ToolDefinition, ToolResult } from '@mtg/tools';
import { toolErrorFor } from './dispatch.ts';
import { jobView } from './task-shapes.ts';

/** The job tools that act on one job, and the task verb each one is. */
export const JOB_TOOL_VERBS: Readonly<Record<string, 'get' | 'result' | 'cancel' | 'answer'>> = {
  get_job_status: 'get',
  get_job_result: 'result',
  cancel_job: 'cancel',
  answer_job: 'answer',
};

/**
 * The job tools: the task verbs as ordinary tools, for clients with no task support. They
 * read the same rows through the same service, so authorization is identical.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- tools of different input types; each one's schema parses its arguments
export function jobTools(tasks: TaskService): ToolDefinition<any>[] {
  const jobId = z
    .object({ jobId: z.string().min(1).max(200).describe('The jobId a long tool returned') })
    .strict();
  // The workload rides along: the per-tool policy gates the task verbs on it (withToolPolicy).
  const ctxOf = (c: ToolContext) => ({ ...c, wire: 'job-tools' });
  const err = (e: TaskError): ToolResult => toolErrorFor(e);
  const view = (t: TaskView, text: string): ToolResult => ({
    content: [{ type: 'text', text }],
    structuredContent: jobView(t),
  });

  const getJobStatus: ToolDefinition<{ jobId: string }> = {
    name: 'get_job_status',
    title: 'Get job status',
    description: 'Status, progress and status message of a job started by a long-running tool.',
    inputSchema: jobId,
    async run(c, { jobId }) {
      const r = await tasks.get(jobId, ctxOf(c));
      if (!r.ok) return err(r);
      const t = r.task;
      const progress = t.progress ? ` (${t.progress.current}/${t.progress.total})` : '';
      const next =
        t.status === 'completed'
          ? ' Call get_job_result for the result.'
          : t.status === 'working'
            ? ` Poll again in ${Math.ceil(t.pollIntervalMs / 1000)}s.`
            : t.status === 'input_required' && t.input
              ? ` The job asks you: ${t.input.message} Answer with answer_job {"jobId":"${t.taskId}","response":{"action":"accept","content":{…}}} filling the form in structuredContent.input.requestedSchema, or {"action":"decline"}.`
              : t.status === 'input_required' && t.approval
                ? ` It waits for approval by another person holding ${t.approval.scope} (list_approvals / approve_task); poll again later.`
                : t.status === 'input_required' && t.inputFrom === 'owner'
                  ? ' The job waits for you: call get_job_status again with a fresh token to resume.'
                  : t.status === 'input_required'
                    ? ` It waits for input its downstream system asks for (not relayed here); it goes on by itself once given. Poll again in ${Math.ceil(t.pollIntervalMs / 1000)}s.`
                    : '';
      return view(t, `Job ${t.taskId} is ${t.status}${progress}: ${t.statusMessage ?? ''}.${next}`);
    },
  };

  const getJobResult: ToolDefinition<{ jobId: string }> = {
    name: 'get_job_result',
    title: 'Get job result',
    description: 'The result of a finished job; says so when the job is still running.',
    inputSchema: jobId,
    async run(c, { jobId }) {
      // One read for status and result: one authorization, one rate-limit point.
      const r = await tasks.read(jobId, ctxOf(c), { withResult: true, verb: 'result' });
      if (!r.ok) return err(r);
      const t = r.task;
      if (t.status === 'working' || t.status === 'input_required')
        return view(
          t,
          `Job ${jobId} is still ${t.status}; poll get_job_status and ask again later.`,
        );
      if (t.status === 'completed') {
        if (r.result === 'gone' || r.result === undefined) return err(RESULT_GONE);
        const stored = r.result.result as ToolResult & { _meta?: Record<string, unknown> };
        // The tool's own _meta (its error code) stays; the related task is added to it.
        return {
          ...stored,
          _meta: { ...stored._meta, 'io.modelcontextprotocol/related-task': { taskId: jobId } },
        };
      }
      return {
        isError: true,
        content: [{ type: 'text', text: `Job ${jobId} ${t.status}: ${t.statusMessage ?? ''}` }],
        structuredContent: { jobId, status: t.status, outcome: t.outcome, endedBy: t.endedBy },
      };
    },
  };

  const cancelJob: ToolDefinition<{ jobId: string; reason?: string }> = {
    name: 'cancel_job',
    title: 'Cancel job',
    description: 'Cancels a running job and returns once the worker has stopped it.',
    inputSchema: z
      .object({ jobId: z.string().min(1).max(200), reason: z.string().max(500).optional() })
      .strict(),
    async run(c, { jobId, reason }) {
      const r = await tasks.cancel(jobId, ctxOf(c), reason ? { reason } : {});
      if (!r.ok) return err(r);
      return view(r.task, `Job ${jobId} is ${r.task.status}.`);
    },
  };

  const answerJob: ToolDefinition<{ jobId: string; response: Record<string, unknown> }> = {
    name: 'answer_job',
    title: 'Answer job',
    description:
      'Answers the question a job asks you (get_job_status shows it and its form): {"action":"accept","content":{…}}, {"action":"decline"} or {"action":"cancel"}.',
    inputSchema: z
      .object({
        jobId: z.string().min(1).max(200),
        response: z
          .object({
            action: z.enum(['accept', 'decline', 'cancel']),
            content: z
              .record(z.string(), z.union([z.string().max(10_000), z.number(), z.boolean()]))
              .optional(),
          })
          .strict(),
      })
      .strict(),
    async run(c, { jobId, response }) {
      const r = await tasks.answer(jobId, ctxOf(c), { response });
      if (!r.ok) return err(r);
      return view(r.task, `Job ${jobId} has your answer and goes on.`);
    },
  };

  const listJobs: ToolDefinition<{ cursor?: string }> = {
    name: 'list_jobs',
    title: 'List jobs',
    description: 'Your jobs, newest first.',
    inputSchema: z.object({ cursor: z.string().max(500).optional() }).strict(),
    async run(c, { cursor }) {
      const r = await tasks.list(ctxOf(c), cursor ? { cursor } : {});
      if (!r.ok) return err(r);
      const jobs = r.tasks.map(jobView);
      return {
        content: [
          {
            type: 'text',
            text: jobs.map((j) => `${j.jobId} ${j.tool} ${j.status}`).join('\n') || 'No jobs.',
          },
        ],
        structuredContent: { jobs, ...(r.nextCursor ? { nextCursor: r.nextCursor } : {}) },
      };
    },
  };

  return [getJobStatus, getJobResult, cancelJob, answerJob, listJobs];
}
