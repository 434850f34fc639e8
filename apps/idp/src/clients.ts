import type { ClientMetadata } from 'oidc-provider';
import { DEV_USER_GRANT, TOKEN_EXCHANGE_GRANT } from './grant-types.ts';

export const AGENT_CLIENTS = ['mcp-agent', 'mcp-agent-2'] as const;
export const SERVICE_CLIENTS = ['mcp-gateway', 'mcp-worker'] as const;
export const STATIC_CLIENTS = [...AGENT_CLIENTS, ...SERVICE_CLIENTS] as const;
export type StaticClientId = (typeof STATIC_CLIENTS)[number];

/** The audit console (apps/console): a public client, a person at a browser. */
export const CONSOLE_CLIENT = 'mcp-console';
/** Where the console receives the authorization code (on any loopback port). */
export const CONSOLE_CALLBACK_PATH = '/auth/callback';

export function isAgentClient(clientId: string): boolean {
  return (AGENT_CLIENTS as readonly string[]).includes(clientId);
}

// Native clients (RFC 8252 §7.3): a loopback redirect URI matches on any port, so these
// paths cover local tools on whatever port they picked, e.g. MCP Inspector on 6274.
const LOOPBACK_CALLBACK_PATHS = ['/', '/callback', '/oauth/callback', '/oauth/callback/debug'];
const LOOPBACK_REDIRECT_URIS = ['127.0.0.1', 'localhost'].flatMap((host) =>
  LOOPBACK_CALLBACK_PATHS.map((p) => `http://${host}${p}`),
);

/** The contract's four confidential clients, and the console's public one. */
export function staticClients(secrets: Record<StaticClientId, string>): ClientMetadata[] {
  const agents = AGENT_CLIENTS.map((id): ClientMetadata => ({
    client_id: id,
    client_secret: secrets[id],
    client_name: id,
    application_type: 'native',
    // client_secret_post works too: oidc-provider accepts either secret method.
    token_endpoint_auth_method: 'client_secret_basic',
    grant_types: ['authorization_code', 'refresh_token', DEV_USER_GRANT, TOKEN_EXCHANGE_GRANT],
    response_types: ['code'],
    redirect_uris: LOOPBACK_REDIRECT_URIS,
  }));
  const services = SERVICE_CLIENTS.map((id): ClientMetadata => ({
    client_id: id,
    client_secret: secrets[id],
    client_name: id,
    token_endpoint_auth_method: 'client_secret_basic',
    grant_types: ['client_credentials', TOKEN_EXCHANGE_GRANT],
    response_types: [],
    redirect_uris: [],
  }));
  // No secret: PKCE binds the code to the console process that asked for it, and a secret
  // shipped with every development stack would protect nothing. A production IdP may
  // register the console as confidential instead (CONSOLE_CLIENT_SECRET, docs/console.md).
  const consoleClient: ClientMetadata = {
    client_id: CONSOLE_CLIENT,
    client_name: 'MCP console',
    application_type: 'native',
    token_endpoint_auth_method: 'none',
    grant_types: ['authorization_code'],
    response_types: ['code'],
    redirect_uris: ['127.0.0.1', 'localhost'].map((h) => `http://${h}${CONSOLE_CALLBACK_PATH}`),
  };
  return [...agents, ...services, consoleClient];
}
