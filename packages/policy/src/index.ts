export type { Workload } from './workload.ts';
export {
  parseSpiffeId,
  spiffeIdOfCertificate,
  type SpiffeId,
  type SpiffeIdOfCertificate,
} from './spiffe-id.ts';
export type { Policy, PolicyDecision, PolicyDenyRule } from './create-policy.ts';
export {
  loadPolicyFile,
  parsePolicy,
  PolicyFileError,
  type PolicyFileErrorCode,
} from './load-policy.ts';
