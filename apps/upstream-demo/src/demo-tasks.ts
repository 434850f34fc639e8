import { randomUUID } from 'node:crypto';

export type DemoTaskStatus = 'working' | 'input_required' | 'completed' | 'failed' | 'cancelled';

/** One upstream task of the demo, the same on either task wire. */
export interface DemoTask {
  taskId: string;
  status: DemoTaskStatus;
  statusMessage: string;
  createdAt: string;
  lastUpdatedAt: string;
  ttlMs: number;
  result?: Record<string, unknown>;
  timer?: NodeJS.Timeout;
  /** approve_change with `elicit`: the question it asks its client while input_required. */
  question?: { key: string; message: string; requestedSchema: Record<string, unknown> };
}

/** What a client answered an elicitation (the protocol's ElicitResult). */
export interface DemoAnswer {
  action: string;
  content?: Record<string, unknown>;
}

/** The tools the demo serves as upstream tasks. */
export const TASK_TOOLS = new Set(['build_artifact', 'approve_change']);

/**
 * The demo's upstream tasks, kept in memory for both wires:
 * - `build_artifact`: four stages of `stepMs`, then the artifact;
 * - `approve_change`: a check (one stage), then `input_required` until the change is
 *   approved, then one more stage and the result. Approved by POST /_approve (out of band),
 *   or, with `elicit: true`, by the client answering the form-mode elicitation the task
 *   asks (2025-11-25: sent on tasks/result; 2026-07-28: its `inputRequests`); a client that
 *   does not approve ends it with a tool error.
 */
export function createDemoTasks(stepMs: number) {
  const tasks = new Map<string, DemoTask>();
  const approved = new Set<string>();
  const waiting = new Map<string, Set<() => void>>();
  const answers = new Map<string, (a: DemoAnswer) => void>();
  const watchers = new Set<() => void>();
  const changed = () => {
    for (const w of watchers) w();
  };
  const pollIntervalMs = Math.max(100, Math.floor(stepMs / 2));

  const touch = (t: DemoTask, status: DemoTaskStatus, message: string) => {
    t.status = status;
    t.statusMessage = message;
    t.lastUpdatedAt = new Date().toISOString();
    if (status !== 'input_required') delete t.question;
    changed();
  };
  const later = (t: DemoTask, fn: () => void) => {
    t.timer = setTimeout(() => {
      if (t.status === 'working' || t.status === 'input_required') fn();
    }, stepMs);
  };

  const buildArtifact = (t: DemoTask, project: string) => {
    let stage = 1;
    const advance = () => {
      stage++;
      if (stage > 4) {
        t.result = {
          content: [{ type: 'text', text: `built ${project}` }],
          structuredContent: { artifact: `${project}.tar.gz` },
        };
        touch(t, 'completed', 'built');
        return;
      }
      touch(t, 'working', `stage ${stage} of 4`);
      later(t, advance);
    };
    later(t, advance);
  };

  const approveChange = (t: DemoTask, change: string, elicit: boolean) => {
    const apply = () => {
      touch(t, 'working', `applying ${change}`);
      later(t, () => {
        t.result = {
          content: [{ type: 'text', text: `applied ${change}` }],
          structuredContent: { change, applied: true },
        };
        touch(t, 'completed', 'applied');
      });
    };
    later(t, () => {
      if (approved.has(change)) return apply();
      touch(t, 'input_required', `approve change ${change} to continue`);
      if (elicit) {
        t.question = {
          key: `approve-${t.taskId}`,
          message: `Approve change ${change}?`,
          requestedSchema: {
            type: 'object',
            properties: {
              approve: { type: 'boolean', title: 'Approve', description: `Apply ${change}` },
              note: { type: 'string', title: 'Note', maxLength: 200 },
            },
            required: ['approve'],
          },
        };
        answers.set(t.taskId, (a) => {
          if (a.action === 'accept' && a.content?.approve === true) return apply();
          t.result = {
            isError: true,
            content: [{ type: 'text', text: `change ${change} not approved (${a.action})` }],
          };
          touch(t, 'completed', 'not approved');
        });
        return;
      }
      let set = waiting.get(change);
      if (!set) waiting.set(change, (set = new Set()));
      set.add(() => {
        if (t.status === 'input_required') apply();
      });
    });
  };

  return {
    pollIntervalMs,
    /** A new task for a task tool, or undefined for any other tool. */
    start(name: string, args: Record<string, unknown>, ttlMs: number): DemoTask | undefined {
      if (!TASK_TOOLS.has(name)) return undefined;
      const now = new Date().toISOString();
      const t: DemoTask = {
        taskId: randomUUID(),
        status: 'working',
        statusMessage: name === 'build_artifact' ? 'stage 1 of 4' : 'checking',
        createdAt: now,
        lastUpdatedAt: now,
        ttlMs,
      };
      tasks.set(t.taskId, t);
      if (name === 'build_artifact') buildArtifact(t, String(args.project));
      else approveChange(t, String(args.change), args.elicit === true);
      return t;
    },
    find: (taskId: string) => tasks.get(taskId),
    /** Cancels a task still running (or waiting for input); false once it ended. */
    cancel(t: DemoTask): boolean {
      if (t.status !== 'working' && t.status !== 'input_required') return false;
      clearTimeout(t.timer);
      touch(t, 'cancelled', 'cancelled by the client');
      return true;
    },
    /** The client's answer to the task's question: false when it asks none (now). */
    answer(t: DemoTask, key: string, a: DemoAnswer): boolean {
      const go = answers.get(t.taskId);
      if (!go || t.status !== 'input_required' || t.question?.key !== key) return false;
      answers.delete(t.taskId);
      go(a);
      return true;
    },
    /** Resolves once the task changes (any task), or when `signal` aborts. */
    changed(signal?: AbortSignal): Promise<void> {
      return new Promise((resolve) => {
        const done = () => {
          watchers.delete(done);
          resolve();
        };
        watchers.add(done);
        signal?.addEventListener('abort', done, { once: true });
      });
    },
    /** Approves a change: tasks waiting for it go on; later ones do not wait. */
    approve(change: string): number {
      approved.add(change);
      const set = waiting.get(change) ?? new Set();
      waiting.delete(change);
      for (const go of set) go();
      return set.size;
    },
    close() {
      for (const t of tasks.values()) clearTimeout(t.timer);
    },
  };
}

export type DemoTasks = ReturnType<typeof createDemoTasks>;

/** The demo's tools, as tools/list shows them on either wire. */
export function demoToolList(extraTools: readonly string[]) {
  return [
    ...extraTools.map((name) => ({
      name,
      description: `An added tool: echoes its text.`,
      inputSchema: { type: 'object', properties: { text: { type: 'string' } } },
    })),
    {
      name: 'build_artifact',
      title: 'Build an artifact',
      description: 'Builds an artifact in four stages (a task on the upstream).',
      inputSchema: {
        type: 'object',
        properties: { project: { type: 'string' } },
        required: ['project'],
      },
      execution: { taskSupport: 'optional' },
    },
    {
      name: 'approve_change',
      title: 'Apply a change once approved',
      description:
        'Checks a change, waits for its approval (the task is input_required until then), then applies it.',
      inputSchema: {
        type: 'object',
        properties: {
          change: { type: 'string' },
          elicit: { type: 'boolean', description: 'Ask the client for the approval' },
        },
        required: ['change'],
      },
      execution: { taskSupport: 'required' },
    },
    {
      name: 'export_ledger',
      title: 'Export a ledger',
      description: 'Exports a ledger, reporting progress (no task support).',
      inputSchema: {
        type: 'object',
        properties: { ledger: { type: 'string' } },
        required: ['ledger'],
      },
    },
    {
      name: 'lookup_ticket',
      title: 'Look up a ticket',
      description: 'Returns a ticket at once.',
      inputSchema: {
        type: 'object',
        properties: { id: { type: 'string' } },
        required: ['id'],
      },
    },
  ];
}
