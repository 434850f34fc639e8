import { defineLongTool } from '@mtg/tool-kit';
import { z } from 'zod';
import type { AcmeConfig } from './config.ts';

const input = z.object({
  account: z.string().regex(/^[A-Z0-9-]{1,32}$/, 'upper-case letters, digits and dashes'),
  invoices: z.number().int().min(1).max(1000),
});

/**
 * Voids an account's open invoices in the ledger, with a person in the loop: it asks its
 * caller to confirm (and why), and above ACME_VOID_APPROVAL_ABOVE invoices waits for a
 * second person holding invoices:approve. While it waits, the task is parked: no worker holds
 * it, and the answer is journaled like a step.
 */
export const voidInvoices = (config: AcmeConfig) =>
  defineLongTool({
    name: 'acme_void_invoices',
    title: 'Void invoices',
    description:
      "Voids an account's open invoices in the ledger after the caller confirms; large voids need a second person's approval.",
    input,
    scope: 'invoices:sync',
    approvalScopes: ['invoices:approve'],
    limits: { defaultDeadlineMs: 24 * 60 * 60_000, maxDeadlineMs: 7 * 24 * 60 * 60_000 },
    summarize: (a) => ({ account: a.account, invoices: a.invoices }),
    async execute(ctx, args) {
      const answer = await ctx.ask({
        message: `Void ${args.invoices} open invoices of ${args.account}? This cannot be undone.`,
        schema: {
          type: 'object',
          properties: {
            confirm: { type: 'boolean', title: 'Void them' },
            reason: { type: 'string', title: 'Why', maxLength: 200 },
          },
          required: ['confirm', 'reason'],
        },
      });
      if (answer.action !== 'accept' || answer.content.confirm !== true) {
        return { account: args.account, voided: 0 };
      }

      if (args.invoices > config.ACME_VOID_APPROVAL_ABOVE) {
        await ctx.approval({
          scope: 'invoices:approve',
          reason: `Void ${args.invoices} invoices of ${args.account}: ${String(answer.content.reason)}`,
          summary: { account: args.account, invoices: args.invoices },
        });
      }

      await ctx.step('ledger:void', async (signal) => {
        await ctx
          .target('ledger')
          .post(
            `/api/ledger/accounts/${args.account}/voids`,
            { invoices: args.invoices },
            { idempotencyKey: `${ctx.taskId}:ledger:void`, signal },
          );
        return { voided: args.invoices };
      });
      return { account: args.account, voided: args.invoices };
    },
  });
