import { parseUpstreams } from '../src/upstream-config.ts';
import { createUpstreamGuard } from '../src/upstream-guard.ts';
import { createTaskUpstreamClient } from '../src/task-upstream-client.ts';
import { formOf } from '../src/upstream-long-tool.ts';

// The worker's task client over a scripted 2026-07-28 upstream (stateless, so one fetch
// seam is the whole upstream): replies are checked against the extension's schemas, an
// input request becomes a question, and its answer goes back as tasks/update.
const [upstream] = parseUpstreams(
  { upstreams: { modern: { url: 'http://u/mcp', scope: 'upstream:modern' } } },
  'test',
);
const now = new Date().toISOString();
const task = (status: string, extra: Record<string, unknown> = {}) => ({
  resultType: 'complete',
  taskId: 't1',
  status,
  createdAt: now,
  lastUpdatedAt: now,
  ttlMs: 60_000,
  ...extra,
});

function scripted(answer: (method: string, params: any) => unknown) {
  const sent: Array<{ method: string; params: any }> = [];
  const fetchImpl = (async (_url: unknown, init?: RequestInit) => {
    const body = JSON.parse(String(init?.body));
    sent.push({ method: body.method, params: body.params });
    const result =
      body.method === 'server/discover'
        ? {
            supportedVersions: ['2026-07-28'],
            capabilities: { extensions: { 'io.modelcontextprotocol/tasks': {} } },
          }
        : answer(body.method, body.params);
    return new Response(JSON.stringify({ jsonrpc: '2.0', id: body.id, result }), {
      headers: { 'content-type': 'application/json' },
    });
  }) as typeof fetch;
  const client = createTaskUpstreamClient({
    upstream: upstream!,
    guard: createUpstreamGuard({
      upstream: 'modern',
      maxConcurrency: 4,
      breakerThreshold: 5,
      breakerCooldownMs: 1000,
    }),
    token: async () => 't',
    invalidate: () => {},
    signal: new AbortController().signal,
    stopEndsTask: () => false,
    beforeCall: async () => {},
    audit: async () => {},
    fetch: fetchImpl,
  });
  return { client, sent };
}

const REF = {
  taskId: 't1',
  sessionId: null,
  protocolVersion: '2026-07-28',
  wire: '2026-07-28',
} as const;

test('a tasks/get that is not a DetailedTask is the upstream protocol error, naming what is wrong', async () => {
  const { client } = scripted(() => ({ resultType: 'complete', taskId: 't1', status: 'working' }));
  await expect(client.getTask(REF)).rejects.toMatchObject({
    code: 'upstream_protocol_error',
    message: expect.stringMatching(/tasks\/get/),
  });
  const bad = scripted(() => task('completed', { result: { resultType: 'complete' } }));
  await expect(bad.client.getTask(REF)).rejects.toMatchObject({ code: 'upstream_protocol_error' });
});

test('an input request is a question; the answer goes back as tasks/update under its key', async () => {
  const asking = task('input_required', {
    inputRequests: {
      q1: {
        method: 'elicitation/create',
        params: {
          mode: 'form',
          message: 'Which one?',
          requestedSchema: { type: 'object', properties: { pick: { type: 'string' } } },
        },
      },
    },
  });
  const { client, sent } = scripted((method) =>
    method === 'tasks/update' ? { resultType: 'complete' } : asking,
  );
  const state = await client.getTask(REF);
  const q = await client.question(REF, state, { answered: [], waitMs: 100 });
  expect(q).toEqual({
    key: 'q1',
    message: 'Which one?',
    requestedSchema: { type: 'object', properties: { pick: { type: 'string' } } },
  });
  // Answered already (a resumed run replayed it): not asked again.
  expect(await client.question(REF, state, { answered: ['q1'], waitMs: 100 })).toBeUndefined();
  await client.answer(REF, q!, { action: 'accept', content: { pick: 'b' } });
  expect(sent.at(-1)).toMatchObject({
    method: 'tasks/update',
    params: { taskId: 't1', inputResponses: { q1: { action: 'accept', content: { pick: 'b' } } } },
  });
});

test("an upstream's form is offered flat: a titled single-select becomes enum + enumNames; nested forms are refused", () => {
  expect(
    formOf({
      type: 'object',
      properties: {
        interpretation: {
          type: 'string',
          title: 'Clarification',
          oneOf: [
            { const: 'snake', title: 'Python snake species' },
            { const: 'comedy', title: 'Monty Python' },
          ],
        },
        n: { type: 'integer', minimum: 1 },
      },
      required: ['interpretation'],
    }),
  ).toEqual({
    type: 'object',
    properties: {
      interpretation: {
        type: 'string',
        title: 'Clarification',
        enum: ['snake', 'comedy'],
        enumNames: ['Python snake species', 'Monty Python'],
      },
      n: { type: 'integer', minimum: 1 },
    },
    required: ['interpretation'],
  });
  expect(
    formOf({ type: 'object', properties: { deep: { type: 'object', properties: {} } } }),
  ).toBeUndefined();
  expect(formOf({ type: 'object', properties: { list: { type: 'array' } } })).toBeUndefined();
});
