export {
  createIdp,
  startIdp,
  type Idp,
  type IdpOptions,
  type RunningIdp,
  type StartIdpOptions,
} from './create-idp.ts';
export { idpConfigSchema, type IdpConfig } from './config.ts';
export { AGENT_CLIENTS, SERVICE_CLIENTS, STATIC_CLIENTS, type StaticClientId } from './clients.ts';
export {
  DEV_USER_GRANT,
  TOKEN_EXCHANGE_GRANT,
  TOKEN_TYPE_ACCESS_TOKEN,
  TOKEN_TYPE_JWT,
} from './grant-types.ts';
export { RESOURCE_SCOPES, DEFAULT_USER_SCOPES, type Resources } from './resources.ts';
export type { DevUser, UserStore } from './user-store.ts';
export {
  CAEP_SESSION_REVOKED,
  RISC_ACCOUNT_DISABLED,
  RISC_ACCOUNT_ENABLED,
  type SecurityEventClaims,
} from './ssf/security-events.ts';
export type { Delivery, PushReport } from './ssf/push-security-events.ts';
