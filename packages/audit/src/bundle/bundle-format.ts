import { z } from 'zod';

/**
 * An evidence bundle (docs/audit.md, "Evidence bundles"). Glossary:
 * - **selection**: what the auditor asked for — one task, or a tenant (or the whole trail)
 *   over a time range such as a month;
 * - **chains**: for each chain with selected events (a tenant's own, and chain 0 for events
 *   from before there were chains), the run the bundle carries, `firstSeq..lastSeq`, from
 *   its first selected event to the head the checkpoint signs of it, with no gap;
 * - **full** event: its hashed fields, so a verifier recomputes its hash (`legacy`: hashed
 *   with the formula without the chain line, chain 0 before migration 080);
 * - **redacted** event: another tenant's event inside a run (only in chain 0's legacy
 *   segment, where tenants shared one chain), given only by its seq, prev_hash and hash, so
 *   the links are checked but its content stays private.
 */
export const BUNDLE_FORMAT = 'mtg-audit-bundle/2';

const hex64 = z.string().regex(/^[0-9a-f]{64}$/);
const timestamp = z.string().regex(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/);

export const BundleSelection = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('task'), taskId: z.string().min(1), tenant: z.string().optional() }),
  z.object({
    kind: z.literal('range'),
    tenant: z.string().optional(),
    /** ISO 8601, inclusive. */
    from: z.string(),
    /** ISO 8601, exclusive. */
    to: z.string(),
  }),
]);
export type BundleSelection = z.infer<typeof BundleSelection>;

const chainId = z.number().int().nonnegative();

export const BundleEvent = z.union([
  z
    .object({
      chain: chainId,
      seq: z.number().int().positive(),
      occurredAt: timestamp,
      type: z.string(),
      prevHash: hex64,
      hash: hex64,
      body: z.string(),
      /** Part of the selection (the rest is in the range only to link it to the checkpoint). */
      selected: z.boolean(),
      /** Hashed without the chain line (chain 0's legacy segment). */
      legacy: z.literal(true).optional(),
    })
    .strict(),
  z
    .object({
      chain: chainId,
      seq: z.number().int().positive(),
      prevHash: hex64,
      hash: hex64,
      redacted: z.literal(true),
    })
    .strict(),
]);
export type BundleEvent = z.infer<typeof BundleEvent>;

export const EvidenceBundle = z
  .object({
    format: z.literal(BUNDLE_FORMAT),
    createdAt: z.string(),
    selection: BundleSelection,
    /** occurred_at of the first and last selected event. */
    period: z.object({ from: timestamp, to: timestamp }).nullable(),
    /** The run of each chain the bundle carries, by chain. */
    chains: z.array(
      z
        .object({
          chain: chainId,
          tenant: z.string().nullable(),
          firstSeq: z.number().int().positive(),
          lastSeq: z.number().int().positive(),
        })
        .strict(),
    ),
    /**
     * The signed checkpoint every run ends at (compact JWS) with the list of every chain head
     * it signs (their hash is what is signed: the heads of other chains, without any of their
     * events), or null when none covers the selection yet.
     */
    checkpoint: z
      .object({
        jws: z.string(),
        heads: z
          .array(
            z.object({ chain: chainId, seq: z.number().int().positive(), hash: hex64 }).strict(),
          )
          .optional(),
      })
      .strict()
      .nullable(),
    /** By chain, then seq. */
    events: z.array(BundleEvent),
  })
  .strict();
export type EvidenceBundle = z.infer<typeof EvidenceBundle>;
