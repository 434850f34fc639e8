import { DEV_USER_GRANT } from '@mtg/dev-secrets';

/**
 * A user's access token from a running dev IdP through its dev-user grant (test and bench
 * stacks; `npm run token` is the CLI for people). Throws with the IdP's error otherwise.
 */
export async function devUserToken(o: {
  issuer: string;
  client: string;
  clientSecret: string;
  sub: string;
  tenant: string;
  resource: string;
  scope?: string;
  ttl?: number;
}): Promise<string> {
  const r = await fetch(`${o.issuer}/token`, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      authorization: `Basic ${Buffer.from(`${o.client}:${o.clientSecret}`).toString('base64')}`,
    },
    body: new URLSearchParams({
      grant_type: DEV_USER_GRANT,
      sub: o.sub,
      tenant: o.tenant,
      resource: o.resource,
      ...(o.scope !== undefined ? { scope: o.scope } : {}),
      ...(o.ttl !== undefined ? { ttl: String(o.ttl) } : {}),
    }),
  });
  const json = (await r.json()) as {
    access_token?: string;
    error?: string;
    error_description?: string;
  };
  if (!json.access_token)
    throw new Error(`token request failed: ${json.error} ${json.error_description}`);
  return json.access_token;
}
