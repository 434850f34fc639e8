// The dev-user grant's name is shared with the token CLI, which must not import this app.
export { DEV_USER_GRANT } from '@mtg/dev-secrets';

/** RFC 8693 OAuth 2.0 Token Exchange. */
export const TOKEN_EXCHANGE_GRANT = 'urn:ietf:params:oauth:grant-type:token-exchange';

export const TOKEN_TYPE_ACCESS_TOKEN = 'urn:ietf:params:oauth:token-type:access_token';
export const TOKEN_TYPE_JWT = 'urn:ietf:params:oauth:token-type:jwt';
