// npm run -s idp:user -- disable|enable --sub alice --tenant acme
// Disables or enables a user of the running dev IdP through its admin API; the IdP then
// pushes the matching security events to the gateway (when SSF_PUSH_URL is configured).
import { parseArgs } from 'node:util';
import { dataDir, loadOrCreateDevSecrets } from '@mtg/dev-secrets';

const USAGE = `usage: npm run -s idp:user -- disable|enable --sub <user> --tenant <tenant>

Calls the admin API of the running dev IdP (IDP_ISSUER, else http://127.0.0.1:$IDP_PORT, port
9400 by default) with IDP_ADMIN_TOKEN, else the token in <DATA_DIR>/dev-secrets.json.`;

class CliError extends Error {}

interface AdminResponse {
  user: { sub: string; tenant: string; disabled: boolean };
  push:
    | { pushed: false; reason: string }
    | {
        pushed: true;
        url: string;
        deliveries: { event: string; delivered: boolean; status?: number; error?: string }[];
      };
}

const shortEvent = (uri: string) => uri.split('/').pop() ?? uri;

async function main(
  argv: string[],
  env: NodeJS.ProcessEnv,
): Promise<{ out: string; warn?: string }> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: {
      sub: { type: 'string' },
      tenant: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
    allowPositionals: true,
    strict: true,
  });
  if (values.help) return { out: USAGE };
  const [action, ...extra] = positionals;
  if ((action !== 'disable' && action !== 'enable') || extra.length) {
    throw new CliError(`first argument must be disable or enable\n${USAGE}`);
  }
  if (!values.sub || !values.tenant)
    throw new CliError(`--sub and --tenant are required\n${USAGE}`);

  const base = env.IDP_ISSUER ?? `http://127.0.0.1:${env.IDP_PORT ?? 9400}`;
  const token = env.IDP_ADMIN_TOKEN ?? (await loadOrCreateDevSecrets(dataDir(env))).idpAdminToken;
  const url = new URL(`admin/users/${action}`, base.endsWith('/') ? base : `${base}/`);

  let response: Response;
  try {
    response = await fetch(url, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ sub: values.sub, tenant: values.tenant }),
      signal: AbortSignal.timeout(15_000),
    });
  } catch (error) {
    throw new CliError(
      `the dev IdP is not reachable at ${base} (${((error as Error).cause as Error | undefined)?.message ?? (error as Error).message}). ` +
        'Start the stack with `npm start`, or set IDP_ISSUER / IDP_PORT.',
    );
  }
  const text = await response.text();
  if (response.status === 401) {
    throw new CliError(
      'the dev IdP refused the admin token (IDP_ADMIN_TOKEN or DATA_DIR differ from the running IdP)',
    );
  }
  if (!response.ok) throw new CliError(`the dev IdP answered HTTP ${response.status}: ${text}`);

  const result = JSON.parse(text) as AdminResponse;
  const who = `user ${result.user.sub} (tenant ${result.user.tenant}) ${result.user.disabled ? 'disabled' : 'enabled'}`;
  if (!result.push.pushed)
    return { out: `${who}; no security events pushed (SSF_PUSH_URL not set)` };
  const lines = result.push.deliveries.map(
    (d) =>
      `  ${shortEvent(d.event)} → ${d.status ?? 'no answer'}${d.delivered ? '' : ` (not delivered${d.error ? `: ${d.error}` : ''})`}`,
  );
  const failed = result.push.deliveries.some((d) => !d.delivered);
  return {
    out: `${who}; security events pushed to ${result.push.url}:\n${lines.join('\n')}`,
    // The account change stands either way; a failed push is worth knowing, not an error.
    warn: failed ? 'warning: the receiver did not accept every security event' : undefined,
  };
}

main(process.argv.slice(2), process.env).then(
  ({ out, warn }) => {
    process.stdout.write(out + '\n');
    if (warn) process.stderr.write(warn + '\n');
  },
  (error: unknown) => {
    process.stderr.write(
      `idp:user: ${error instanceof CliError || error instanceof TypeError ? error.message : String((error as Error)?.stack ?? error)}\n`,
    );
    process.exitCode = 1;
  },
);
