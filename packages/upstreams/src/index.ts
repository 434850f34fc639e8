export {
  loadUpstreams,
  upstreamQueue,
  UpstreamConfigError,
  type UpstreamConfig,
} from './upstream-config.ts';
export { UpstreamError, type UpstreamErrorCode } from './upstream-error.ts';
export {
  createUpstreamGuard,
  type UpstreamCallOutcome,
  type UpstreamGuard,
} from './upstream-guard.ts';
export { startUpstreamHub, type UpstreamHub } from './upstream-hub.ts';
export { upstreamToolsFrom, type UpstreamTools } from './upstream-catalogue.ts';
export { CATALOGUE_CHANNEL } from './catalogue-store.ts';
export { createTaskUpstreamClient, type UpstreamAuditType } from './task-upstream-client.ts';
export { SESSION_EXPIRY_MARGIN_MS, type UpstreamSessionPool } from './upstream-session-pool.ts';
