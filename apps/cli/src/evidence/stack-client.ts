import { randomBytes } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { DevSecrets } from '@mtg/dev-secrets';
import { devUserToken } from '../lib/dev-user-token.ts';
import { pollUntil } from '../lib/poll-until.ts';

export interface StackEndpoints {
  mcp: string;
  idp: string;
  downstream: string;
}

export type Answer = { ok: true; value: any } | { ok: false; error: string };

/** What the evidence checks need from a running stack: tokens, tool calls, writes, the IdP. */
export function stackClient(endpoints: StackEndpoints, secrets: DevSecrets) {
  const token = async (sub: string, tenant: string, o: { client?: string; scope?: string; ttl?: number } = {}) => {
    const client = (o.client ?? 'mcp-agent') as keyof DevSecrets['clientSecrets'];
    return devUserToken({
      issuer: endpoints.idp,
      client,
      clientSecret: secrets.clientSecrets[client],
      sub,
      tenant,
      resource: endpoints.mcp,
      ...(o.scope ? { scope: o.scope } : {}),
      ...(o.ttl ? { ttl: o.ttl } : {}),
    });
  };

  const call = async (bearer: string, name: string, args: Record<string, unknown>, meta?: Record<string, unknown>): Promise<Answer> => {
    const client = new Client({ name: 'evidence', version: '1.0.0' });
    try {
      await client.connect(new StreamableHTTPClientTransport(new URL(endpoints.mcp), { requestInit: { headers: { Authorization: `Bearer ${bearer}` } } }));
      const r = await client.callTool({ name, arguments: args, ...(meta ? { _meta: meta } : {}) });
      if (r.isError) return { ok: false, error: (r.content as Array<{ text: string }>)[0]?.text ?? 'error' };
      return { ok: true, value: r.structuredContent };
    } catch (error) {
      return { ok: false, error: error instanceof Error ? error.message : String(error) };
    } finally {
      await client.close().catch(() => {});
    }
  };

  return {
    token,
    call,
    /** Raw HTTP status of a poll with this token (to show a 401 after expiry). */
    async pollStatus(bearer: string, jobId: string): Promise<{ status: number; wwwAuthenticate: string | null }> {
      const r = await fetch(endpoints.mcp, {
        method: 'POST',
        headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'get_job_status', arguments: { jobId } } }),
      });
      await r.text();
      return { status: r.status, wwwAuthenticate: r.headers.get('www-authenticate') };
    },
    async writes(taskId: string): Promise<Array<{ idempotencyKey: string; sub: string; act: unknown; at: string }>> {
      return (await (await fetch(`${endpoints.downstream}/_writes?taskId=${taskId}`)).json()) as never;
    },
    async idpUser(action: 'disable' | 'enable', sub: string, tenant: string): Promise<void> {
      const r = await fetch(`${endpoints.idp}/admin/users/${action}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${secrets.idpAdminToken}`, 'content-type': 'application/json' },
        body: JSON.stringify({ sub, tenant }),
      });
      if (!r.ok) throw new Error(`idp ${action} ${sub}: ${r.status} ${await r.text()}`);
    },
    randomId: () => randomBytes(16).toString('hex'),
    /** A name unique to this run, so reruns never collide with earlier evidence. */
    unique: (prefix: string) => `${prefix}-${randomBytes(3).toString('hex')}`,
  };
}

export type StackClient = ReturnType<typeof stackClient>;

/** pollUntil every 250 ms: throws on timeout, which the runner reports as a check that could not run. */
export function waitFor<T>(fn: () => Promise<T>, done: (v: T) => boolean, timeoutMs: number, everyMs = 250): Promise<T> {
  return pollUntil(fn, done, timeoutMs, everyMs);
}
