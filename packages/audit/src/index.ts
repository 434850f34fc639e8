export {
  appendAuditGrouped,
  appendAuditInTransaction,
  auditAppendArgs,
  auditAppendTemplate,
  filledAuditBody,
  filledBySql,
  appendAuditEventsInTransaction,
  observeAuditAppends,
  type AuditPool,
  type AuditTransaction,
  type AuditEvent,
  type AuditEventType,
} from './append-audit.ts';
export { appendEventSql } from './group-commit.ts';
export { canonicalJson } from './canonical-json.ts';
export { cellText, toCsv } from './export/csv.ts';
export { runWithRequestOrigin, type RequestOrigin } from './request-origin.ts';
export {
  eventHash,
  hashInput,
  canonicalTimestamp,
  GENESIS_HASH,
  type HashedFields,
} from './chain/event-hash.ts';
export {
  createChainVerifier,
  type ChainAnchor,
  type ChainEvent,
  type ChainFailure,
  type ChainFailureCode,
  type ChainVerifier,
  type ChainVerifierOptions,
  type EventColumns,
} from './chain/chain-verifier.ts';
export { readChain, readChainSession, type ReadChainOptions } from './chain/read-chain.ts';
export {
  generateSigningJwk,
  loadSigningKey,
  publicJwkOf,
  SigningKeyError,
  type SigningKey,
} from './checkpoint/signing-key.ts';
export {
  signCheckpoint,
  headsHash,
  headsText,
  type ChainHead,
  type CheckpointPayload,
  type SignedCheckpoint,
} from './checkpoint/sign-checkpoint.ts';
export {
  createCheckpointVerifier,
  type CheckpointProblemCode,
  type CheckpointVerification,
} from './checkpoint/verify-checkpoint.ts';
export {
  verifyAuditTrail,
  AuditVerifyUsageError,
  type ChainReport,
  type TrailFailure,
  type CheckpointInput,
  type CheckpointProblem,
  type VerifyAuditTrailOptions,
  type VerifyAuditTrailReport,
} from './verify-audit-trail.ts';
export {
  createCheckpoint,
  type CreateCheckpointOptions,
  type CreateCheckpointResult,
  type RefusedChain,
} from './create-checkpoint.ts';
export { ensurePartitions } from './ensure-partitions.ts';
export {
  type ArchiveChain,
  type ArchiveHeader,
  type ArchiveLine,
} from './archive/archive-format.ts';
export {
  verifyArchive,
  type ArchiveVerification,
  type ArchiveFailureCode,
} from './archive/verify-archive.ts';
export { exportMonth, type MonthBounds } from './archive/export-month.ts';
export {
  BUNDLE_FORMAT,
  type EvidenceBundle,
  BundleSelection,
  type BundleEvent,
} from './bundle/bundle-format.ts';
export {
  buildBundle,
  type BuildBundleOptions,
  type BuildBundleResult,
} from './bundle/build-bundle.ts';
export { verifyBundle, type BundleFailureCode, type BundleReport } from './bundle/verify-bundle.ts';
export {
  declareStatusReadPolicy,
  describeStatusReadPolicy,
  readStatusReadPolicy,
  type StatusReadPolicy,
} from './status-read-policy.ts';
