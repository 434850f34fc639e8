import { z } from 'zod';
import type { TaskError, TaskService, TaskView } from '@mtg/tasks';
import type { ToolContext, ToolDefinition, ToolResult } from '@mtg/tools';
import { toolErrorFor } from './dispatch.ts';

/** The job tools that act on one job, and the task verb each one is. */
export const JOB_TOOL_VERBS: Readonly<Record<string, 'get' | 'result' | 'cancel'>> = {
  get_job_status: 'get',
  get_job_result: 'result',
  cancel_job: 'cancel',
};

/**
 * The job tools: the task verbs as ordinary tools, for clients with no task support. They
 * read the same rows through the same service, so authorization is identical.
 */
export function jobTools(tasks: TaskService): ToolDefinition<any>[] {
  const jobId = z
    .object({ jobId: z.string().min(1).max(200).describe('The jobId a long tool returned') })
    .strict();
  // The workload rides along: the per-tool policy gates the task verbs on it (withToolPolicy).
  const ctxOf = (c: ToolContext) => ({ ...c, wire: 'job-tools' });
  const err = (e: TaskError): ToolResult => toolErrorFor(e);
  const view = (t: TaskView, text: string): ToolResult => ({
    content: [{ type: 'text', text }],
    structuredContent: { ...t, jobId: t.taskId },
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
            : t.status === 'input_required'
              ? ' The job waits for you: call get_job_status again with a fresh token to resume.'
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
      const r = await tasks.result(jobId, ctxOf(c));
      if (!r.ok) {
        if (r.code === 'result_not_ready') {
          const s = await tasks.get(jobId, ctxOf(c));
          if (s.ok)
            return view(
              s.task,
              `Job ${jobId} is still ${s.task.status}; poll get_job_status and ask again later.`,
            );
        }
        return err(r);
      }
      if (r.result)
        return {
          ...r.result.result,
          _meta: { 'io.modelcontextprotocol/related-task': { taskId: jobId } },
        } as ToolResult;
      return {
        isError: true,
        content: [
          { type: 'text', text: `Job ${jobId} ${r.task.status}: ${r.task.statusMessage ?? ''}` },
        ],
        structuredContent: {
          jobId,
          status: r.task.status,
          outcome: r.task.outcome,
          endedBy: r.task.endedBy,
        },
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

  const listJobs: ToolDefinition<{ cursor?: string }> = {
    name: 'list_jobs',
    title: 'List jobs',
    description: 'Your jobs, newest first.',
    inputSchema: z.object({ cursor: z.string().max(500).optional() }).strict(),
    async run(c, { cursor }) {
      const r = await tasks.list(ctxOf(c), cursor ? { cursor } : {});
      if (!r.ok) return err(r);
      const jobs = r.tasks.map((t) => ({ ...t, jobId: t.taskId }));
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

  return [getJobStatus, getJobResult, cancelJob, listJobs];
}
