import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CancelTaskResultSchema } from '@modelcontextprotocol/sdk/types.js';

export type ActionResult = { ok: true; detail: string } | { ok: false; message: string };

/**
 * What an operator does from the console, done by the gateway with the operator's own token:
 * the gateway authorizes (tenant, `tasks:admin`), acts and audits each action — and each
 * refusal — exactly as for any other client. The console itself holds no such right.
 */
export function createGatewayActions(options: { mcpUrl: string; fetch?: typeof fetch }) {
  const doFetch = options.fetch ?? fetch;
  const gateway = new URL(options.mcpUrl).origin;

  return {
    /** tasks/cancel over MCP (the admin path: another user's task in the same tenant). */
    async cancelTask(token: string, taskId: string): Promise<ActionResult> {
      const client = new Client({ name: 'mcp-console', version: '1.0.0' });
      try {
        await client.connect(
          new StreamableHTTPClientTransport(new URL(options.mcpUrl), {
            requestInit: { headers: { Authorization: `Bearer ${token}` } },
            fetch: doFetch,
          }),
        );
        const r = await client.request(
          { method: 'tasks/cancel', params: { taskId } },
          CancelTaskResultSchema,
        );
        return { ok: true, detail: `task is ${r.status}` };
      } catch (error) {
        return {
          ok: false,
          message: String((error as Error).message).replace(/^MCP error -?\d+: /, ''),
        };
      } finally {
        await client.close().catch(() => {});
      }
    },
    /**
     * A gateway tool over MCP with the person's own token (list_approvals, approve_task,
     * reject_task): the gateway decides who may, and audits.
     */
    async callTool(
      token: string,
      name: string,
      args: Record<string, unknown>,
    ): Promise<
      | { ok: true; text: string; structured: Record<string, unknown> }
      | { ok: false; message: string }
    > {
      const client = new Client({ name: 'mcp-console', version: '1.0.0' });
      try {
        await client.connect(
          new StreamableHTTPClientTransport(new URL(options.mcpUrl), {
            requestInit: { headers: { Authorization: `Bearer ${token}` } },
            fetch: doFetch,
          }),
        );
        const r = await client.callTool({ name, arguments: args });
        const text = (r.content as Array<{ text?: string }>).map((c) => c.text ?? '').join(' ');
        if (r.isError) return { ok: false, message: text };
        return {
          ok: true,
          text,
          structured: (r.structuredContent ?? {}) as Record<string, unknown>,
        };
      } catch (error) {
        return {
          ok: false,
          message: String((error as Error).message).replace(/^MCP error -?\d+: /, ''),
        };
      } finally {
        await client.close().catch(() => {});
      }
    },
    /** POST /admin/principals/revoke|restore. */
    async principal(
      token: string,
      action: 'revoke' | 'restore',
      subject: string,
      reason?: string,
    ): Promise<ActionResult> {
      let r: Response;
      try {
        r = await doFetch(`${gateway}/admin/principals/${action}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ subject, ...(reason ? { reason } : {}) }),
        });
      } catch (error) {
        return {
          ok: false,
          message: `the gateway cannot be reached (${(error as Error).message})`,
        };
      }
      const body = (await r.json().catch(() => ({}))) as {
        error_description?: string;
        error?: string;
        cancelledTasks?: string[];
      };
      if (!r.ok)
        return { ok: false, message: body.error_description ?? body.error ?? `HTTP ${r.status}` };
      return {
        ok: true,
        detail:
          action === 'revoke'
            ? `${subject} revoked; ${body.cancelledTasks?.length ?? 0} open task(s) cancelled`
            : `${subject} restored`,
      };
    },
  };
}

export type GatewayActions = ReturnType<typeof createGatewayActions>;
