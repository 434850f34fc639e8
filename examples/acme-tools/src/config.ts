import { z } from 'zod';

/** The pack's own environment variables, validated when the gateway or a worker starts. */
export const acmeConfig = z.object({
  ACME_CURRENCY: z.enum(['EUR', 'USD', 'GBP']).default('EUR'),
  /** Pause between invoice writes, to be gentle with the ledger. */
  ACME_INVOICE_DELAY_MS: z.coerce.number().int().min(0).max(60_000).default(100),
  /** acme_void_invoices voiding more invoices than this needs a second person's approval. */
  ACME_VOID_APPROVAL_ABOVE: z.coerce.number().int().min(0).default(10),
});

export type AcmeConfig = z.infer<typeof acmeConfig>;
