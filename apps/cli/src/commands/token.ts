// npm run -s token -- --sub alice --tenant acme [--client mcp-agent] [--scope "..."] [--ttl S] [--resource URL]
// Prints only an access token, obtained from the running dev IdP through its dev-user grant.
import { parseArgs } from 'node:util';
import * as client from 'openid-client';
import { DEV_USER_GRANT } from '@mtg/dev-secrets';
import { dataDir, DEV_CLIENTS, loadOrCreateDevSecrets, type DevClient } from '@mtg/dev-secrets';

const USAGE = `usage: npm run -s token -- --sub <user> --tenant <tenant> [--client mcp-agent|mcp-agent-2]
                          [--scope "env:provision reports:run"] [--ttl <seconds>] [--resource <url>]

Prints an access token of the running dev IdP (IDP_ISSUER, else http://127.0.0.1:$IDP_PORT,
port 9400 by default). The default resource is GATEWAY_RESOURCE, else
http://127.0.0.1:$GATEWAY_PORT/mcp; the default scopes are every non-admin scope.`;

class CliError extends Error {}

function isLoopback(url: URL): boolean {
  // RFC 6761: every name under .localhost is loopback (the compose stack's mtg.localhost).
  return (
    ['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname) ||
    url.hostname.endsWith('.localhost')
  );
}

async function clientSecret(clientId: string, env: NodeJS.ProcessEnv): Promise<string> {
  if (env.IDP_CLIENT_SECRETS) {
    let secrets: Record<string, unknown>;
    try {
      secrets = JSON.parse(env.IDP_CLIENT_SECRETS) as Record<string, unknown>;
    } catch {
      throw new CliError('IDP_CLIENT_SECRETS is not a JSON object');
    }
    const secret = secrets[clientId];
    if (typeof secret !== 'string')
      throw new CliError(`IDP_CLIENT_SECRETS has no secret for ${clientId}`);
    return secret;
  }
  if (!(DEV_CLIENTS as readonly string[]).includes(clientId)) {
    throw new CliError(`unknown client ${clientId}; dev clients: ${DEV_CLIENTS.join(', ')}`);
  }
  const secrets = await loadOrCreateDevSecrets(dataDir(env));
  return secrets.clientSecrets[clientId as DevClient];
}

async function main(argv: string[], env: NodeJS.ProcessEnv): Promise<string> {
  const { values } = parseArgs({
    args: argv,
    options: {
      sub: { type: 'string' },
      tenant: { type: 'string' },
      client: { type: 'string', default: 'mcp-agent' },
      scope: { type: 'string' },
      ttl: { type: 'string' },
      resource: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  });
  if (values.help) return USAGE;
  if (!values.sub || !values.tenant)
    throw new CliError(`--sub and --tenant are required\n${USAGE}`);

  const issuer = new URL(env.IDP_ISSUER ?? `http://127.0.0.1:${env.IDP_PORT ?? 9400}`);
  const resource =
    values.resource ?? env.GATEWAY_RESOURCE ?? `http://127.0.0.1:${env.GATEWAY_PORT ?? 3000}/mcp`;
  const clientId = values.client;
  const secret = await clientSecret(clientId, env);

  let config: client.Configuration;
  try {
    config = await client.discovery(issuer, clientId, undefined, client.ClientSecretBasic(secret), {
      // Plain http only for the local IdP.
      execute: isLoopback(issuer) ? [client.allowInsecureRequests] : [],
      timeout: 5,
    });
  } catch (error) {
    throw new CliError(
      `the dev IdP is not reachable at ${issuer.href} (${(error as Error).message}; ` +
        `${((error as Error).cause as Error | undefined)?.message ?? 'no detail'}). ` +
        'Start the stack with `npm start`, or set IDP_ISSUER / IDP_PORT.',
    );
  }

  const params: Record<string, string> = { sub: values.sub, tenant: values.tenant, resource };
  if (values.scope !== undefined) params.scope = values.scope;
  if (values.ttl !== undefined) params.ttl = values.ttl;
  try {
    const response = await client.genericGrantRequest(config, DEV_USER_GRANT, params);
    return response.access_token;
  } catch (error) {
    if (error instanceof client.ResponseBodyError) {
      throw new CliError(
        `the dev IdP refused: ${error.error}${error.error_description ? `: ${error.error_description}` : ''}`,
      );
    }
    if (error instanceof client.WWWAuthenticateChallengeError) {
      throw new CliError(
        `the dev IdP refused the client credentials of ${clientId} (HTTP ${error.status}); ` +
          'are IDP_CLIENT_SECRETS / DATA_DIR the ones the running IdP uses?',
      );
    }
    throw error;
  }
}

main(process.argv.slice(2), process.env).then(
  (token) => process.stdout.write(token + '\n'),
  (error: unknown) => {
    process.stderr.write(
      `token: ${error instanceof CliError || error instanceof TypeError ? error.message : String((error as Error)?.stack ?? error)}\n`,
    );
    process.exitCode = 1;
  },
);
