import { connectV1 } from '../support/clients.ts';
import { pollUntil } from '../support/poll.ts';
import { startStack, type Stack } from '../support/stack.ts';

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({ workers: 1 });
});
afterAll(async () => {
  await stack?.close();
});

type Sc = Record<string, any>;

test('a client without task support gets a job handle at once, polls it, and reads the result', async () => {
  const client = await connectV1(stack.mcpUrl, await stack.token('alice', 'acme'));
  // Listing first makes the client validate results against advertised output schemas.
  const { tools } = await client.listTools();
  expect(tools.find((t) => t.name === 'provision_test_environment')?.outputSchema).toBeUndefined();
  const started = await client.callTool({
    name: 'provision_test_environment',
    arguments: { branch: 'feature-x', services: ['api', 'web'] },
  });
  const handle = started.structuredContent as Sc;
  expect(handle.jobId).toMatch(/^[0-9a-f]{32}$/);
  expect(handle.status).toBe('working');

  const status = await pollUntil(
    async () =>
      (await client.callTool({ name: 'get_job_status', arguments: { jobId: handle.jobId } }))
        .structuredContent as Sc,
    (s) => s.status !== 'working',
  );
  expect(status.status).toBe('completed');

  const result = await client.callTool({
    name: 'get_job_result',
    arguments: { jobId: handle.jobId },
  });
  expect(result.isError).toBeFalsy();
  expect(result.structuredContent).toMatchObject({
    namespace: `env-${handle.jobId}`,
    branch: 'feature-x',
  });

  const writes = await stack.writes(handle.jobId);
  expect(writes.map((w) => w.idempotencyKey).sort()).toEqual(
    ['apply-permissions', 'create-namespace', 'deploy:api', 'deploy:web', 'seed-database']
      .map((s) => `${handle.jobId}:${s}`)
      .sort(),
  );
  // Every write was made for alice, by the worker acting on a gateway delegation.
  for (const w of writes) {
    expect(w.sub).toBe('alice');
    expect(w.act).toEqual({ sub: 'mcp-worker', act: { sub: 'mcp-gateway' } });
  }
  const listed = await client.callTool({ name: 'list_jobs', arguments: {} });
  expect((listed.structuredContent as Sc).jobs.map((j: Sc) => j.jobId)).toContain(handle.jobId);
  await client.close();
});
