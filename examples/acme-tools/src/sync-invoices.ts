import { defineLongTool } from '@mtg/tool-kit';
import { z } from 'zod';
import type { AcmeConfig } from './config.ts';

const input = z.object({
  account: z.string().regex(/^[A-Z0-9-]{1,32}$/, 'upper-case letters, digits and dashes'),
  invoices: z.number().int().min(1).max(50),
});

/**
 * Copies an account's open invoices from the CRM into the ledger: opens a sync in the CRM,
 * writes each invoice to the ledger (one step each, so a crash resumes at the first unwritten
 * invoice), then closes the sync in the CRM. Every write carries an idempotency key made of the
 * task id and the step, so a retried write lands once.
 */
export const syncInvoices = (config: AcmeConfig) =>
  defineLongTool({
    name: 'acme_sync_invoices',
    title: 'Sync invoices to the ledger',
    description:
      'Copies the open invoices of a CRM account into the ledger. Runs as a durable task.',
    input,
    scope: 'invoices:sync',
    limits: { defaultDeadlineMs: 10 * 60_000, retentionMs: 60 * 60_000 },
    summarize: (a) => ({ account: a.account, invoices: a.invoices }),
    async execute(ctx, args) {
      const crm = ctx.target('crm');
      const ledger = ctx.target('ledger');
      const key = (step: string) => `${ctx.taskId}:${step}`;

      await ctx.step('crm:open-sync', async (signal) => {
        await crm.post(
          `/api/crm/accounts/${args.account}/syncs`,
          { taskId: ctx.taskId, invoices: args.invoices },
          { idempotencyKey: key('crm:open-sync'), signal },
        );
        return { opened: true };
      });

      let total = 0;
      for (let i = 1; i <= args.invoices; i++) {
        const written = await ctx.step(`ledger:invoice:${i}`, async (signal) => {
          await ctx.sleep(config.ACME_INVOICE_DELAY_MS);
          await ledger.post(
            `/api/ledger/accounts/${args.account}/invoices`,
            { number: i, currency: config.ACME_CURRENCY },
            { idempotencyKey: key(`ledger:invoice:${i}`), signal },
          );
          return { number: i };
        });
        total += 1;
        await ctx.progress(
          i,
          args.invoices,
          `invoice ${written.number} of ${args.invoices} written`,
        );
      }

      await ctx.step('crm:close-sync', async (signal) => {
        await crm.post(
          `/api/crm/accounts/${args.account}/syncs/close`,
          { written: total },
          { idempotencyKey: key('crm:close-sync'), signal },
        );
        return { closed: true };
      });
      return { account: args.account, invoices: total, currency: config.ACME_CURRENCY };
    },
  });
