import { connectV1 } from '../support/clients.ts';
import { pollUntil } from '../support/poll.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { planUpstreams } from '../support/upstreams.ts';

// Proxied instant calls keep an upstream session per caller and exchanged token: the demo
// upstream (a real MCP server verifying its own tokens) shows every session it opened and
// ended at /_sessions. More entries front the same demo upstream with a pool of two sessions
// (`few.`), a one-second idle timeout (`idle.`) and one of an hour (`keep.`).
let stack: Stack;
let upstreams: Awaited<ReturnType<typeof planUpstreams>>;

beforeAll(async () => {
  upstreams = await planUpstreams({
    demoStepMs: 300,
    extra: ({ demoUrl: url }) =>
      ['few', 'idle', 'keep']
        .map((name) =>
          [
            `  ${name}:`,
            `    url: ${url}`,
            `    prefix: ${name}.`,
            '    scope: upstream:demo',
            '    mode: instant',
            '    include: [lookup_ticket]',
            {
              few: '    maxSessions: 2',
              idle: '    sessionIdleMs: 1000',
              keep: '    sessionIdleMs: 3600000',
            }[name]!,
          ].join('\n'),
        )
        .join('\n'),
  });
  await upstreams.start();
  stack = await startStack({
    env: { UPSTREAMS_FILE: upstreams.file },
    onIssuer: (issuer) => upstreams.trust(issuer),
  });
}, 60_000);
afterAll(async () => {
  await stack?.close();
  await upstreams?.close();
});

// One access token per caller, as a client holds it: its exchanges (and so its upstream
// token and session) are reused while fresh. A caller with a new token gets a new session.
const tokens = new Map<string, Promise<string>>();
const tokenOf = (sub: string) => {
  if (!tokens.has(sub)) tokens.set(sub, stack.token(sub, 'acme'));
  return tokens.get(sub)!;
};

/** One proxied call as `sub`; its structuredContent (the upstream saw `sub`). */
async function lookup(sub: string, tool = 'demo.lookup_ticket', id = 'T-1') {
  const client = await connectV1(stack.mcpUrl, await tokenOf(sub));
  try {
    const r = await client.callTool({ name: tool, arguments: { id } });
    expect(r.isError).toBeFalsy();
    return r.structuredContent as { sub: string };
  } finally {
    await client.close();
  }
}

/** Sessions the gateway opened for `sub` (the listing's sessions are the gateway's own). */
const sessionsOf = (sub: string) => upstreams.sessions().filter((s) => s.sub === sub);
const callSessions = (sub: string) =>
  upstreams
    .calls()
    .filter((c) => c.method === 'tools/call' && c.sub === sub)
    .map((c) => c.sessionId);

test('two calls of one caller reuse one upstream session', async () => {
  expect((await lookup('alice')).sub).toBe('alice');
  expect((await lookup('alice')).sub).toBe('alice');
  expect(sessionsOf('alice')).toHaveLength(1);
  const used = callSessions('alice');
  expect(used).toHaveLength(2);
  expect(new Set(used)).toEqual(new Set([sessionsOf('alice')[0]!.sessionId]));
  expect(sessionsOf('alice')[0]!.endedAt).toBeUndefined();
  // A new access token of the same user is another exchange: another session.
  tokens.delete('alice');
  await lookup('alice');
  expect(sessionsOf('alice')).toHaveLength(2);
});

test('concurrent calls of one caller share its session; each call is audited', async () => {
  await Promise.all(Array.from({ length: 6 }, (_, i) => lookup('carol', undefined, `C-${i}`)));
  expect(sessionsOf('carol')).toHaveLength(1);
  expect(callSessions('carol')).toHaveLength(6);
  const audited = await sql(
    stack.db.url,
    `SELECT count(*)::int AS n FROM audit.events
      WHERE type = 'upstream.call' AND body::jsonb->>'subject' = 'carol'`,
  );
  expect(audited[0].n).toBe(6);
});

test('two different callers never share a session: the upstream sees each one’s own sub', async () => {
  const [a, b] = await Promise.all([lookup('dave'), lookup('erin')]);
  expect(a.sub).toBe('dave');
  expect(b.sub).toBe('erin');
  const dave = new Set(callSessions('dave'));
  const erin = new Set(callSessions('erin'));
  expect(dave.size).toBe(1);
  expect(erin.size).toBe(1);
  expect([...dave][0]).not.toBe([...erin][0]);
  // Every request on a session carries the identity it was opened with.
  for (const sub of ['alice', 'carol', 'dave', 'erin']) {
    const mine = new Set(sessionsOf(sub).map((s) => s.sessionId));
    for (const c of upstreams.calls().filter((c) => c.sessionId && mine.has(c.sessionId))) {
      expect(c.sub).toBe(sub);
    }
  }
});

test('the upstream dropping the session (a restart): the next call succeeds on a new session', async () => {
  expect((await lookup('frank')).sub).toBe('frank');
  const before = sessionsOf('frank')[0]!.sessionId;
  await upstreams.stopDemo();
  await upstreams.restartDemo(); // a new process: it knows none of the old sessions
  expect((await lookup('frank')).sub).toBe('frank');
  const now = sessionsOf('frank');
  expect(now).toHaveLength(1);
  expect(now[0]!.sessionId).not.toBe(before);
  const outcomes = await sql(
    stack.db.url,
    `SELECT body::jsonb->'data'->>'outcome' AS outcome FROM audit.events
      WHERE type = 'upstream.call' AND body::jsonb->>'subject' = 'frank' ORDER BY seq`,
  );
  expect(outcomes.map((o) => o.outcome)).toEqual(['ok', 'ok']);
});

const refuse = (body: Record<string, unknown>) =>
  fetch(new URL('/_refuse', upstreams.demoUrl), {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });

test('the upstream refusing a kept session’s token (401): one re-exchange, a new session, the call succeeds', async () => {
  await lookup('mona');
  const [first] = sessionsOf('mona');
  expect((await refuse({ tokenId: first!.tokenId })).status).toBe(204);
  expect((await lookup('mona')).sub).toBe('mona');
  const both = sessionsOf('mona');
  expect(both).toHaveLength(2);
  expect(both[1]!.tokenId).not.toEqual(first!.tokenId);
  // The refused token is not used again: later calls go on the new session.
  await lookup('mona');
  expect(callSessions('mona').slice(-2)).toEqual([both[1]!.sessionId, both[1]!.sessionId]);
});

test('a second 401 (after the re-exchange) is the tool error upstream_unauthorized', async () => {
  await lookup('nina');
  await refuse({ sub: 'nina' });
  const client = await connectV1(stack.mcpUrl, await tokenOf('nina'));
  try {
    const r = await client.callTool({ name: 'demo.lookup_ticket', arguments: { id: 'x' } });
    expect(r.isError).toBe(true);
    expect((r._meta as any)['io.mcp-task-gateway/tool-error'].code).toBe('upstream_unauthorized');
  } finally {
    await client.close();
  }
  const [audited] = await sql(
    stack.db.url,
    `SELECT body::jsonb->'data'->>'outcome' AS outcome FROM audit.events
      WHERE type = 'upstream.call' AND body::jsonb->>'subject' = 'nina' ORDER BY seq DESC LIMIT 1`,
  );
  expect(audited.outcome).toBe('upstream_unauthorized');
});

test('a session ends with its token: once the exchanged token nears expiry, a fresh one opens a new session', async () => {
  // Idle sessions are kept for an hour here: only the token's expiry can end this one.
  await lookup('gina', 'keep.lookup_ticket');
  const [first] = sessionsOf('gina');
  // The exchanged token lives 300 s; past 270 s neither it nor its session is used again.
  stack.clock.advance(275_000);
  try {
    await lookup('gina', 'keep.lookup_ticket');
  } finally {
    stack.clock.reset();
  }
  const both = sessionsOf('gina');
  expect(both).toHaveLength(2);
  expect(both[1]!.tokenId).not.toEqual(first!.tokenId);
  // The old session is ended (DELETE), not left open upstream.
  await pollUntil(
    async () => sessionsOf('gina')[0]!.endedAt,
    (ended) => ended !== undefined,
    10_000,
  );
  expect(sessionsOf('gina')[1]!.endedAt).toBeUndefined();
});

test('with maxSessions 2 the least recently used session is ended for a third caller', async () => {
  await lookup('hank', 'few.lookup_ticket');
  await lookup('ivan', 'few.lookup_ticket');
  await lookup('hank', 'few.lookup_ticket'); // hank's is now the most recently used
  await lookup('jill', 'few.lookup_ticket');
  await pollUntil(
    async () => sessionsOf('ivan')[0]?.endedAt,
    (ended) => ended !== undefined,
    10_000,
  );
  expect(sessionsOf('hank')).toHaveLength(1);
  expect(sessionsOf('hank')[0]!.endedAt).toBeUndefined();
  expect(sessionsOf('jill')[0]!.endedAt).toBeUndefined();
});

test('a session unused for sessionIdleMs is ended', async () => {
  await lookup('kim', 'idle.lookup_ticket');
  await pollUntil(
    async () => sessionsOf('kim')[0]?.endedAt,
    (ended) => ended !== undefined,
    15_000,
  );
});

test('the gateway shutting down ends every session it kept', async () => {
  await lookup('lena');
  expect(sessionsOf('lena')[0]!.endedAt).toBeUndefined();
  await stack.restartGateway();
  expect(sessionsOf('lena')[0]!.endedAt).toBeDefined();
  // And the restarted gateway serves the caller again, on a new session.
  expect((await lookup('lena')).sub).toBe('lena');
  expect(sessionsOf('lena')).toHaveLength(2);
});
