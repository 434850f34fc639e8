import { Client as V1Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as V1Transport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  Client as V2Client,
  StreamableHTTPClientTransport as V2Transport,
} from '@modelcontextprotocol/client';

/** A v1-SDK client (speaks up to 2025-11-25 over `initialize`) with a bearer token. */
export async function connectV1(
  mcpUrl: string,
  token: string,
  capabilities: Record<string, unknown> = {},
) {
  const client = new V1Client({ name: 'test-v1', version: '1.0.0' }, { capabilities });
  await client.connect(
    new V1Transport(new URL(mcpUrl), {
      requestInit: { headers: { Authorization: `Bearer ${token}` } },
    }),
  );
  return client;
}

/** A v2-SDK client (negotiates 2026-07-28 with server/discover) with a bearer token. */
export async function connectV2(mcpUrl: string, token: string) {
  const client = new V2Client(
    { name: 'test-v2', version: '2.0.0' },
    { versionNegotiation: { mode: { pin: '2026-07-28' } } },
  );
  await client.connect(
    new V2Transport(new URL(mcpUrl), {
      requestInit: { headers: { Authorization: `Bearer ${token}` } },
    }),
  );
  return client;
}
