import { connectV1, connectV2 } from '../support/clients.ts';
import { startStack, type Stack } from '../support/stack.ts';

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({ workers: 0 });
});
afterAll(async () => {
  await stack?.close();
});

test('a 2025-11-25 client (v1 SDK) lists tools and sees alice/acme/mcp-agent from whoami', async () => {
  const client = await connectV1(stack.mcpUrl, await stack.token('alice', 'acme'));
  expect(client.getServerVersion()?.name).toBe('mcp-task-gateway');
  const { tools } = await client.listTools();
  expect(tools.map((t) => t.name)).toEqual(
    expect.arrayContaining(['whoami', 'provision_test_environment', 'get_job_status']),
  );
  const result = await client.callTool({ name: 'whoami', arguments: {} });
  expect(result.structuredContent).toMatchObject({
    subject: 'alice',
    tenant: 'acme',
    client: 'mcp-agent',
  });
  await client.close();
});

test('a 2026-07-28 client (v2 SDK) lists tools and sees alice/acme/mcp-agent from whoami', async () => {
  const client = await connectV2(stack.mcpUrl, await stack.token('alice', 'acme'));
  const { tools } = await client.listTools();
  expect(tools.map((t) => t.name)).toContain('whoami');
  const result = await client.callTool({ name: 'whoami', arguments: {} });
  expect(result.structuredContent).toMatchObject({
    subject: 'alice',
    tenant: 'acme',
    client: 'mcp-agent',
  });
  await client.close();
});
