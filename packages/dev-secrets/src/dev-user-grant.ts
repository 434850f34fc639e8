/** Issues a user token without a browser; for tests and the token CLI only. */
export const DEV_USER_GRANT = 'urn:mcp-task-gateway:grant-type:dev-user';
