export type { Workload } from './workload.ts';
export {
  parseSpiffeId,
  spiffeIdOfCertificate,
  type SpiffeId,
  type SpiffeIdOfCertificate,
} from './spiffe-id.ts';
export { policyDocumentSchema, type PolicyDocument } from './policy-document.ts';
export {
  createPolicy,
  type Policy,
  type PolicyDecision,
  type PolicyDenyRule,
} from './create-policy.ts';
export {
  loadPolicyFile,
  parsePolicy,
  PolicyFileError,
  type PolicyFileErrorCode,
} from './load-policy.ts';
