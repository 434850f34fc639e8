export { hasScopes, type Principal, type Actor } from './principal.ts';
export {
  createKeySource,
  KeysUnavailableError,
  type KeySource,
  type KeySourceOptions,
  type RemoteKeySourceOptions,
  type StaticKeySourceOptions,
  type GetKey,
} from './create-key-source.ts';
export {
  verifyAccessToken,
  DEFAULT_ALGORITHMS,
  type TokenErrorCode,
  type VerifyAccessTokenOptions,
  type VerifyOptions,
  type KeyResolver,
  type VerifyAccessTokenResult,
} from './verify-access-token.ts';
export {
  resolveClaimMapping,
  mapClaims,
  type ClaimMapping,
  type ClaimMappingOverrides,
  type ClaimPreset,
  type ScopeClaim,
  type TenantMapping,
  type MappedClaims,
  type MapClaimsResult,
} from './claim-mapping.ts';
export {
  claimMappingEnv,
  claimMappingFromEnv,
  claimMappingFromConfig,
  type ClaimMappingEnv,
} from './claim-mapping-env.ts';
export {
  bearerChallenge,
  type BearerChallengeOptions,
  type BearerErrorCode,
} from './bearer-challenge.ts';
export {
  protectedResourceMetadata,
  metadataUrlsFor,
  type ProtectedResourceMetadata,
  type ProtectedResourceMetadataOptions,
} from './protected-resource-metadata.ts';
export { extractBearer, type ExtractBearerResult } from './extract-bearer.ts';
export { clientCredentialsToken } from './client-credentials-token.ts';
export { httpFetch } from './http-fetch.ts';
export {
  createCredentialCipher,
  type CredentialCipher,
  type SealedCredential,
} from './credential-cipher.ts';
export {
  credentialKeysEnv,
  checkCredentialKeys,
  credentialKeysFromConfig,
  type CredentialKeysEnv,
} from './credential-keys-env.ts';
export {
  createTokenExchanger,
  exchangeParameters,
  type ExchangeStyle,
  type ExchangeRequest,
  type ExchangedToken,
  type ExchangeOutcome,
  type ExchangeRefusalCode,
  type TokenExchanger,
} from './exchange-token.ts';
export { acceptableAlgorithms, screenCompactJws } from './screen-compact-jws.ts';
export { discoverJwksUriPatiently, type DiscoveryLog } from './discover-jwks-uri.ts';
export { trustIssuer, type IssuerSettings } from './trust-issuer.ts';
export {
  cachedTokenVerifier,
  type CachedVerifierOptions,
  type TokenVerifier,
} from './cached-token-verifier.ts';
