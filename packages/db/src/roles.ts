/**
 * Application roles created by packages/db/migrations (NOLOGIN group roles). Each process logs in with
 * a LOGIN role that is a member of its group only (provisionLoginRoles) and runs its sessions
 * as the group; it refuses an owner or superuser login (checkApplicationLogin), from which
 * SET ROLE could climb back (docs/operations.md, "Database roles").
 */
export const ROLES = {
  gateway: 'mtg_gateway',
  worker: 'mtg_worker',
  auditor: 'mtg_auditor',
  /** Signs audit checkpoints (npm run audit:checkpoint); reads the chain, writes checkpoints. */
  auditSigner: 'mtg_audit_signer',
  downstream: 'mtg_downstream',
  /** The console: what mtg_auditor reads, plus its own sessions and the queues summaries. */
  console: 'mtg_console',
} as const;
export type AppRole = (typeof ROLES)[keyof typeof ROLES];
