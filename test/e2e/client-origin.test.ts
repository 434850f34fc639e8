// Where a refused request came from: its client address (X-Forwarded-For believed only from
// TRUSTED_PROXIES, read from the right) and user agent, in the request log line and in the
// auth.denied / task.denied events it causes.
import { Writable } from 'node:stream';
import { randomUUID } from 'node:crypto';
import winston from 'winston';
import { clientAddress } from '../../apps/gateway/src/http/client-origin.ts';
import { createLogger } from '@mtg/log';
import { pollUntil } from '../support/poll.ts';
import { rpc2026 } from '../support/raw-2026.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';

let stack: Stack;
const lines: Array<Record<string, unknown>> = [];

beforeAll(async () => {
  const logger = createLogger('test');
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const raw of chunk.toString('utf8').split('\n').filter(Boolean))
        lines.push(JSON.parse(raw) as Record<string, unknown>);
      done();
    },
  });
  logger.clear().add(new winston.transports.Stream({ stream: sink }));
  // The test's own requests come from 127.0.0.1: here, that is the trusted proxy.
  stack = await startStack({ workers: 0, logger, env: { TRUSTED_PROXIES: '127.0.0.1' } });
});
afterAll(async () => {
  await stack?.close();
});

const denial = async (type: string, reason: string, where = '') =>
  (
    await pollUntil(
      () =>
        sql(
          stack.db.url,
          `SELECT body FROM audit.events WHERE type = $1 AND reason = $2 ${where} ORDER BY seq`,
          [type, reason],
        ),
      (rows) => rows.length > 0,
      10_000,
      50,
    )
  ).map((r) => JSON.parse(r.body) as { origin?: unknown })[0]!;

describe('clientAddress', () => {
  const trusted = new Set(['10.0.0.1', '10.0.0.2']);
  test.each([
    [
      'an untrusted peer is the client, whatever it forwards',
      '192.0.2.9',
      ['203.0.113.7'],
      '192.0.2.9',
    ],
    ['a trusted peer without X-Forwarded-For is the client', '10.0.0.1', undefined, '10.0.0.1'],
    ['a trusted peer: the address it appended', '10.0.0.1', ['203.0.113.7'], '203.0.113.7'],
    [
      'entries a client prepended are not believed',
      '10.0.0.1',
      ['198.51.100.1, 203.0.113.7'],
      '203.0.113.7',
    ],
    [
      'trusted proxies in the chain are skipped',
      '10.0.0.1',
      ['203.0.113.7, 10.0.0.2'],
      '203.0.113.7',
    ],
    [
      'repeated headers are one chain',
      '10.0.0.1',
      ['198.51.100.1', '203.0.113.7, 10.0.0.2'],
      '203.0.113.7',
    ],
    [
      'a malformed hop stops the walk at the proxy that added it',
      '10.0.0.1',
      ['203.0.113.7, bogus'],
      '10.0.0.1',
    ],
    ['IPv4-mapped peers are unmapped', '::ffff:10.0.0.1', ['203.0.113.7'], '203.0.113.7'],
  ])('%s', (_name, peer, forwarded, expected) => {
    expect(clientAddress(peer, forwarded, trusted)).toBe(expected);
  });
});

test('a 401 names the client address its trusted proxy forwarded and the user agent, in the audit event and the request log', async () => {
  const correlationId = randomUUID();
  const res = await fetch(stack.mcpUrl, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'user-agent': 'origin-probe/1.0',
      'x-forwarded-for': '198.51.100.1, 203.0.113.7',
      'x-request-id': correlationId,
    },
    body: '{}',
  });
  expect(res.status).toBe(401);
  const event = await denial('auth.denied', 'token_missing');
  expect(event.origin).toEqual({ ip: '203.0.113.7', userAgent: 'origin-probe/1.0' });
  const line = await pollUntil(
    async () => lines.find((l) => l.message === 'request' && l.correlationId === correlationId),
    (l) => l !== undefined,
    5000,
    20,
  );
  expect(line).toMatchObject({
    status: 401,
    clientIp: '203.0.113.7',
    userAgent: 'origin-probe/1.0',
  });
});

test('a task.denied names where the refused request came from', async () => {
  const token = await stack.token('origin-user', 'origin-tenant');
  await rpc2026(
    stack.mcpUrl,
    token,
    'tasks/get',
    { taskId: 'no-such-task' },
    {
      tasksExtension: true,
      headers: { 'user-agent': 'agent-x/2', 'x-forwarded-for': '203.0.113.8' },
    },
  );
  const event = await denial('task.denied', 'malformed_task_id', `AND subject = 'origin-user'`);
  expect(event.origin).toEqual({ ip: '203.0.113.8', userAgent: 'agent-x/2' });
});

test('without TRUSTED_PROXIES, X-Forwarded-For is ignored: the peer is the client', async () => {
  stack.env.TRUSTED_PROXIES = '';
  await stack.restartGateway();
  const res = await fetch(stack.mcpUrl, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      authorization: 'Bearer a b',
      'user-agent': 'spoofer/1',
      'x-forwarded-for': '203.0.113.9',
    },
    body: '{}',
  });
  expect(res.status).toBe(400);
  const event = await denial('auth.denied', 'token_malformed_header');
  expect(event.origin).toEqual({ ip: '127.0.0.1', userAgent: 'spoofer/1' });
});
