/** Issues a user token without a browser; for tests and the token CLI only. */
export const DEV_USER_GRANT = 'urn:mcp-task-gateway:grant-type:dev-user';

/** RFC 8693 OAuth 2.0 Token Exchange. */
export const TOKEN_EXCHANGE_GRANT = 'urn:ietf:params:oauth:grant-type:token-exchange';

export const TOKEN_TYPE_ACCESS_TOKEN = 'urn:ietf:params:oauth:token-type:access_token';
export const TOKEN_TYPE_JWT = 'urn:ietf:params:oauth:token-type:jwt';
