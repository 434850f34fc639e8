import { z } from 'zod';

/**
 * An evidence bundle (docs/audit.md, "Evidence bundles"). Glossary:
 * - **selection**: what the auditor asked for — one task, or a tenant (or the whole trail)
 *   over a time range such as a month;
 * - **range**: the run of the chain the bundle carries, `firstSeq..lastSeq`, from the first
 *   selected event to the event the checkpoint signs, with no gap;
 * - **full** event: its hashed fields, so a verifier recomputes its hash;
 * - **redacted** event: another tenant's event inside the range, given only by its seq,
 *   prev_hash and hash, so the links are checked but its content stays private.
 */
export const BUNDLE_FORMAT = 'mtg-audit-bundle/1';

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

export const BundleEvent = z.union([
  z
    .object({
      seq: z.number().int().positive(),
      occurredAt: timestamp,
      type: z.string(),
      prevHash: hex64,
      hash: hex64,
      body: z.string(),
      /** Part of the selection (the rest is in the range only to link it to the checkpoint). */
      selected: z.boolean(),
    })
    .strict(),
  z
    .object({
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
    range: z.object({ firstSeq: z.number().int(), lastSeq: z.number().int() }).nullable(),
    /** The signed checkpoint at range.lastSeq (compact JWS), or null when none covers it. */
    checkpoint: z.object({ jws: z.string() }).nullable(),
    events: z.array(BundleEvent),
  })
  .strict();
export type EvidenceBundle = z.infer<typeof EvidenceBundle>;
