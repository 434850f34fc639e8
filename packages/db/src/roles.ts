/**
 * Application roles created by db/migrations (NOLOGIN group roles). A process that connects
 * with an owner/superuser URL drops to its role with SET ROLE on every connection, so the
 * database enforces least privilege; production deployments give each process a LOGIN role
 * that is a member of these instead (docs/operations.md).
 */
export const ROLES = {
  gateway: 'mtg_gateway',
  worker: 'mtg_worker',
  auditor: 'mtg_auditor',
  /** Signs audit checkpoints (npm run audit:checkpoint); reads the chain, writes checkpoints. */
  auditSigner: 'mtg_audit_signer',
  downstream: 'mtg_downstream',
} as const;
export type AppRole = (typeof ROLES)[keyof typeof ROLES];
