import { defineLongTool } from '@mtg/tool-kit';
import { z } from 'zod';
import type { DemoConfig } from './index.ts';

const input = z
  .object({
    branch: z.string().min(1).max(200).describe('Git branch to deploy'),
    services: z
      .array(z.string().regex(/^[a-z0-9][a-z0-9-]{0,62}$/, 'lowercase letters, digits and dashes'))
      .min(1)
      .max(20)
      .refine((s) => new Set(s).size === s.length, 'services must be distinct')
      .describe('Services to deploy (1-20)'),
  })
  .strict();
/**
 * Creates namespace `env-<taskId>` (deterministic, so a resumed run finds its own), grants
 * the task's owner access (owner from the task row, never from arguments), deploys the
 * services in parallel and seeds a database. Every write carries an idempotency key made
 * of the task id and the step name.
 */
export const provisionTestEnvironment = (config: DemoConfig) =>
  defineLongTool({
    name: 'provision_test_environment',
    title: 'Provision a test environment',
    description:
      'Creates an isolated test environment for a branch: namespace env-<taskId>, your permissions, ' +
      'the listed services deployed in parallel, and a seeded database. Runs as a durable task.',
    input,
    output: z.object({
      namespace: z.string(),
      branch: z.string(),
      services: z.array(z.object({ service: z.string(), status: z.string() })),
      database: z.string(),
    }),
    scope: 'env:provision',
    summarize: (a) => ({
      branch: a.branch,
      services: a.services.slice(0, 20),
      serviceCount: a.services.length,
    }),
    async execute(ctx, args) {
      const namespace = `env-${ctx.taskId}`;
      const key = (step: string) => `${ctx.taskId}:${step}`;
      const total = 3 + args.services.length;
      let done = 0;
      const tick = (message: string) => ctx.progress(++done, total, message);

      await ctx.step('create-namespace', async (signal) => {
        await ctx.sleep(config.DEMO_STEP_MS);
        await ctx
          .target('downstream')
          .post(
            '/api/namespaces',
            { namespace },
            { idempotencyKey: key('create-namespace'), signal },
          );
        return { namespace };
      });
      await tick(`namespace ${namespace} created`);

      await ctx.step('apply-permissions', async (signal) => {
        await ctx.sleep(config.DEMO_STEP_MS);
        await ctx
          .target('downstream')
          .post(
            `/api/namespaces/${namespace}/permissions`,
            { tenant: ctx.owner.tenant, subject: ctx.owner.subject, role: 'admin' },
            { idempotencyKey: key('apply-permissions'), signal },
          );
        return { subject: ctx.owner.subject, role: 'admin' };
      });
      await tick('permissions applied');

      const deployed = await Promise.all(
        args.services.map((service) =>
          ctx
            .step(`deploy:${service}`, async (signal) => {
              await ctx.sleep(config.DEMO_STEP_MS);
              await ctx
                .target('downstream')
                .post(
                  `/api/namespaces/${namespace}/deployments`,
                  { service, branch: args.branch },
                  { idempotencyKey: key(`deploy:${service}`), signal },
                );
              return { service, status: 'running' };
            })
            .then(async (r) => {
              await tick(`deployed ${service}`);
              return r;
            }),
        ),
      );

      const database = await ctx.step('seed-database', async (signal) => {
        await ctx.sleep(config.DEMO_STEP_MS);
        await ctx
          .target('downstream')
          .post(
            `/api/namespaces/${namespace}/databases`,
            { name: 'app', seed: args.branch },
            { idempotencyKey: key('seed-database'), signal },
          );
        return `${namespace}/app`;
      });
      await tick('database seeded');

      return { namespace, branch: args.branch, services: deployed, database };
    },
  });
