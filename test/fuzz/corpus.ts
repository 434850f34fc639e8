// The hostile-input corpus: one case per known way to break a JSON-RPC-over-HTTP endpoint
// or a token check. `kind` says what the gateway may do with it: an `invalid` request must
// change nothing (no task, no audit event beyond a denial); a `may-create` request is
// well-formed but odd (unicode, size) and may legitimately start a task.
import { gzipSync, deflateSync } from 'node:zlib';
import type { JWK, JWTPayload } from 'jose';
import {
  hmacWithPublicKey,
  signToken,
  unsecuredToken,
  userClaims,
  type SigningKey,
} from '../support/forge-token.ts';
import type { RawRequest } from './send-raw.ts';
import { NASTY_STRINGS } from './random.ts';

export interface FuzzCase extends RawRequest {
  name: string;
  kind: 'invalid' | 'may-create';
}

export interface CorpusEnv {
  mcpUrl: string;
  issuer: string;
  goodToken: string;
  /** A task of the good token's user (working: no workers run). */
  taskId: string;
  idpKey: SigningKey;
  foreignKey: SigningKey;
  publicJwk: JWK & { kid: string };
}

const META_2026 = {
  'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientInfo': { name: 'fuzz', version: '1' },
  'io.modelcontextprotocol/clientCapabilities': {
    extensions: { 'io.modelcontextprotocol/tasks': {} },
  },
};

export function headers(
  token: string | undefined,
  extra: Record<string, string> = {},
): Record<string, string> {
  return {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    ...(token !== undefined ? { authorization: `Bearer ${token}` } : {}),
    ...extra,
  };
}

/** What a header can carry at all (node:http refuses other characters outright). */
const HEADER_SAFE = /^[\t\x20-\x7e\x80-\xff]*$/;

export function modern(
  token: string,
  method: string,
  params: Record<string, unknown>,
  id: unknown = 1,
): RawRequest {
  // The 2026 wire repeats the tool name / task id in Mcp-Name.
  const name = method === 'tools/call' ? params.name : params.taskId;
  const mcpName: Record<string, string> =
    typeof name === 'string' && HEADER_SAFE.test(name) && name.length < 8000
      ? { 'mcp-name': name }
      : {};
  return {
    headers: headers(token, {
      'mcp-protocol-version': '2026-07-28',
      'mcp-method': method,
      ...mcpName,
    }),
    body: JSON.stringify({ jsonrpc: '2.0', id, method, params: { ...params, _meta: META_2026 } }),
  };
}

export function legacy(
  token: string,
  method: string,
  params: Record<string, unknown>,
  id: unknown = 1,
): RawRequest {
  return {
    headers: headers(token, { 'mcp-protocol-version': '2025-11-25' }),
    body: JSON.stringify({ jsonrpc: '2.0', id, method, params }),
  };
}

const INITIALIZE = {
  protocolVersion: '2025-11-25',
  capabilities: {},
  clientInfo: { name: 'fuzz', version: '1' },
};

export async function buildCorpus(env: CorpusEnv): Promise<FuzzCase[]> {
  const t = env.goodToken;
  const cases: FuzzCase[] = [];
  const invalid = (name: string, r: RawRequest) => cases.push({ name, kind: 'invalid', ...r });
  const mayCreate = (name: string, r: RawRequest) => cases.push({ name, kind: 'may-create', ...r });
  const raw = (body: string | Buffer, extra: Record<string, string> = {}): RawRequest => ({
    headers: headers(t, extra),
    body,
  });

  // --- Malformed JSON
  for (const [name, body] of [
    ['empty body', ''],
    ['one brace', '{'],
    ['unterminated string', '{"jsonrpc":"2.0","method":"ping","id":1,"x":"'],
    ['trailing comma', '{"jsonrpc":"2.0","method":"ping","id":1,}'],
    ['two objects', '{"jsonrpc":"2.0","method":"ping","id":1}{"a":1}'],
    ['single quotes', "{'jsonrpc':'2.0'}"],
    ['NaN literal', '{"jsonrpc":"2.0","method":"ping","id":NaN}'],
    ['huge exponent', '{"jsonrpc":"2.0","method":"ping","id":1e999999}'],
    ['BOM then JSON', '\ufeff{"jsonrpc":"2.0","method":"ping","id":1}'],
    ['NUL byte', '\u0000'],
    ['lone surrogate escape as the whole body', '"\\ud800"'],
    ['bare null', 'null'],
    ['bare number', '42'],
    ['comment', '/* x */ {"jsonrpc":"2.0","method":"ping","id":1}'],
  ] as const)
    invalid(`malformed JSON: ${name}`, raw(body));
  invalid(
    'malformed JSON: invalid UTF-8 bytes',
    raw(Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d])),
  );
  invalid(
    'malformed JSON: CESU-8 surrogate bytes in a string',
    raw(
      Buffer.concat([
        Buffer.from('{"jsonrpc":"2.0","method":"'),
        Buffer.from([0xed, 0xa0, 0x80]),
        Buffer.from('","id":1}'),
      ]),
    ),
  );
  invalid(
    'malformed JSON: overlong UTF-8 encoding of "/"',
    raw(
      Buffer.concat([
        Buffer.from('{"jsonrpc":"2.0","method":"'),
        Buffer.from([0xc0, 0xaf]),
        Buffer.from('","id":1}'),
      ]),
    ),
  );

  // --- Wrong JSON-RPC shapes
  const rpc = (o: unknown) => raw(JSON.stringify(o));
  for (const [name, body] of [
    ['no jsonrpc', { id: 1, method: 'ping' }],
    ['jsonrpc 1.0', { jsonrpc: '1.0', id: 1, method: 'ping' }],
    ['jsonrpc number', { jsonrpc: 2.0, id: 1, method: 'ping' }],
    ['id object', { jsonrpc: '2.0', id: { a: 1 }, method: 'ping' }],
    ['id array', { jsonrpc: '2.0', id: [1], method: 'ping' }],
    ['id boolean', { jsonrpc: '2.0', id: true, method: 'ping' }],
    ['id null', { jsonrpc: '2.0', id: null, method: 'ping' }],
    ['id huge string', { jsonrpc: '2.0', id: 'i'.repeat(100_000), method: 'ping' }],
    ['method number', { jsonrpc: '2.0', id: 1, method: 7 }],
    ['method empty', { jsonrpc: '2.0', id: 1, method: '' }],
    ['method unknown', { jsonrpc: '2.0', id: 1, method: 'no/such/method' }],
    ['method with NUL', { jsonrpc: '2.0', id: 1, method: 'tools/\u0000call' }],
    [
      'params array',
      { jsonrpc: '2.0', id: 1, method: 'tools/call', params: ['bulk_update_records'] },
    ],
    ['params string', { jsonrpc: '2.0', id: 1, method: 'tools/call', params: 'x' }],
    ['params null', { jsonrpc: '2.0', id: 1, method: 'tools/call', params: null }],
    ['response object', { jsonrpc: '2.0', id: 1, result: {} }],
    ['error object', { jsonrpc: '2.0', id: 1, error: { code: -1, message: 'x' } }],
    ['empty batch', []],
    ['nested batch', [[{ jsonrpc: '2.0', id: 1, method: 'ping' }]]],
    ['batch of scalars', [1, 2, 3]],
    [
      'batch of 2,000 pings',
      Array.from({ length: 2000 }, (_, i) => ({ jsonrpc: '2.0', id: i, method: 'ping' })),
    ],
    [
      'batch of 50 tools/call without tasks',
      Array.from({ length: 50 }, (_, i) => ({
        jsonrpc: '2.0',
        id: i,
        method: 'tools/call',
        params: { name: 'no_such_tool' },
      })),
    ],
    [
      '__proto__ pollution',
      JSON.parse(
        '{"jsonrpc":"2.0","id":1,"method":"ping","__proto__":{"admin":true},"constructor":{"prototype":{"x":1}}}',
      ),
    ],
  ] as const)
    invalid(`JSON-RPC shape: ${name}`, rpc(body));
  // The same shapes on the 2026 envelope and the legacy one, with tool and task verbs.
  for (const [name, method, params] of [
    ['tools/call without name', 'tools/call', { arguments: {} }],
    ['tools/call name number', 'tools/call', { name: 5, arguments: {} }],
    ['tools/call unknown tool', 'tools/call', { name: 'rm_rf', arguments: {} }],
    ['tools/call arguments string', 'tools/call', { name: 'bulk_update_records', arguments: 'x' }],
    ['tools/call arguments array', 'tools/call', { name: 'bulk_update_records', arguments: [] }],
    ['tools/call arguments null', 'tools/call', { name: 'bulk_update_records', arguments: null }],
    [
      'tools/call count negative',
      'tools/call',
      { name: 'bulk_update_records', arguments: { collection: 'c', count: -1, patch: { a: 1 } } },
    ],
    [
      'tools/call count 1e308',
      'tools/call',
      {
        name: 'bulk_update_records',
        arguments: { collection: 'c', count: 1e308, patch: { a: 1 } },
      },
    ],
    [
      'tools/call count string',
      'tools/call',
      { name: 'bulk_update_records', arguments: { collection: 'c', count: '10', patch: { a: 1 } } },
    ],
    [
      'tools/call extra argument',
      'tools/call',
      {
        name: 'bulk_update_records',
        arguments: { collection: 'c', count: 1, patch: { a: 1 }, sudo: true },
      },
    ],
    [
      'tools/call empty patch',
      'tools/call',
      { name: 'bulk_update_records', arguments: { collection: 'c', count: 1, patch: {} } },
    ],
    [
      'tools/call services 21 items',
      'tools/call',
      {
        name: 'provision_test_environment',
        arguments: { branch: 'b', services: Array(21).fill('s') },
      },
    ],
    [
      'tools/call services of numbers',
      'tools/call',
      { name: 'provision_test_environment', arguments: { branch: 'b', services: [1, 2] } },
    ],
    ['tasks/get taskId number', 'tasks/get', { taskId: 5 }],
    ['tasks/get taskId object', 'tasks/get', { taskId: { $ne: null } }],
    ['tasks/get taskId SQL', 'tasks/get', { taskId: "' OR 1=1 --" }],
    ['tasks/get taskId 10k chars', 'tasks/get', { taskId: 'f'.repeat(10_000) }],
    ['tasks/get unknown task', 'tasks/get', { taskId: '0'.repeat(32) }],
    ['tasks/get upper-case id of a real task', 'tasks/get', { taskId: env.taskId.toUpperCase() }],
    ['tasks/get id with NUL', 'tasks/get', { taskId: env.taskId.slice(0, 31) + '\u0000' }],
    ['tasks/cancel without taskId', 'tasks/cancel', {}],
    // Of an unknown task: on the legacy wire tasks/result of a live task blocks until it ends.
    ['tasks/result of an unknown task', 'tasks/result', { taskId: 'a'.repeat(32) }],
    ['tasks/list with a forged cursor', 'tasks/list', { cursor: 'eyJ4IjoxfQ' }],
    [
      'get_job_status with an RTL-override id',
      'tools/call',
      { name: 'get_job_status', arguments: { jobId: '\u202e' + env.taskId } },
    ],
    [
      'cancel_job with a lone surrogate id',
      'tools/call',
      { name: 'cancel_job', arguments: { jobId: '\ud800' } },
    ],
  ] as const) {
    invalid(`2026 wire: ${name}`, modern(t, method, params));
    invalid(`legacy wire: ${name}`, legacy(t, method, params));
  }
  // Input that once reached PostgreSQL as it came: driver text (-32603) or a 500.
  const cursor = (c: unknown) => Buffer.from(JSON.stringify(c)).toString('base64url');
  for (const [name, c] of [
    ['a date PostgreSQL cannot read', { at: '1 1', id: '0'.repeat(32) }],
    ['a year out of range', { at: '+275760-09-13T00:00:00.000Z', id: '0'.repeat(32) }],
  ] as const)
    invalid(
      `legacy wire: tasks/list with a cursor holding ${name}`,
      legacy(t, 'tasks/list', { cursor: cursor(c) }),
    );
  for (const ttl of [-5, 0.5])
    invalid(
      `legacy wire: task-augmented tools/call with task.ttl ${ttl}`,
      legacy(t, 'tools/call', {
        name: 'generate_report',
        arguments: { report: `ttl-${String(ttl).replace('.', '-')}` },
        task: { ttl },
      }),
    );
  invalid('host: userinfo before a served host', {
    ...legacy(t, 'tools/list', {}),
    headers: { ...legacy(t, 'tools/list', {}).headers, host: 'evil@127.0.0.1' },
  });
  // Batches were removed in 2025-06-18: refused whole, so none of these starts a task.
  for (const version of ['2025-06-18', '2025-11-25'])
    invalid(`batch under ${version} of task starts`, {
      headers: headers(t, { 'mcp-protocol-version': version }),
      body: JSON.stringify(
        [1, 2].map((i) => ({
          jsonrpc: '2.0',
          id: i,
          method: 'tools/call',
          params: { name: 'generate_report', arguments: { report: `batch-${version}-${i}` } },
        })),
      ),
    });
  invalid(
    'legacy wire: initialize with an unknown version',
    legacy(t, 'initialize', { ...INITIALIZE, protocolVersion: '1999-01-01' }),
  );
  invalid(
    'legacy wire: initialize with capabilities of the wrong type',
    legacy(t, 'initialize', { ...INITIALIZE, capabilities: 'all' }),
  );
  invalid('2026 wire: protocol header and envelope disagree', {
    ...modern(t, 'tools/list', {}),
    headers: headers(t, { 'mcp-protocol-version': '2025-11-25', 'mcp-method': 'tools/list' }),
  });
  invalid('2026 wire: Mcp-Method header names another method', {
    ...modern(t, 'tools/call', {
      name: 'bulk_update_records',
      arguments: { collection: 'c', count: 1, patch: { a: 1 } },
    }),
    headers: headers(t, { 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/list' }),
  });
  invalid('2026 wire: unknown protocol version in the envelope', {
    headers: headers(t, { 'mcp-protocol-version': '2031-01-01', 'mcp-method': 'tools/list' }),
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/list',
      params: { _meta: { ...META_2026, 'io.modelcontextprotocol/protocolVersion': '2031-01-01' } },
    }),
  });

  // --- Huge and deeply nested
  invalid(
    'huge: 1.5 MB body (over MAX_BODY_BYTES)',
    raw(
      JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'ping',
        params: { pad: 'x'.repeat(1_500_000) },
      }),
    ),
  );
  invalid(
    'huge: 900 KB collection name',
    modern(t, 'tools/call', {
      name: 'bulk_update_records',
      arguments: { collection: 'c'.repeat(900_000), count: 1, patch: { a: 1 } },
    }),
  );
  invalid('deep: 100,000 nested arrays', raw('['.repeat(100_000) + ']'.repeat(100_000)));
  invalid('deep: 5,000 nested objects', raw('{"a":'.repeat(5000) + '1' + '}'.repeat(5000)));
  invalid(
    'deep: 200-level patch value',
    modern(t, 'tools/call', {
      name: 'bulk_update_records',
      arguments: { collection: 'c', count: 1, patch: { a: nest(200) } },
    }),
  );
  invalid('deep: unterminated 100,000 open brackets', raw('['.repeat(100_000)));
  mayCreate(
    'wide: patch with 20,000 keys',
    modern(t, 'tools/call', {
      name: 'bulk_update_records',
      arguments: {
        collection: 'wide',
        count: 1,
        patch: Object.fromEntries(Array.from({ length: 20_000 }, (_, i) => [`k${i}`, i])),
      },
    }),
  );
  mayCreate(
    'deep: 100-level patch value (under the limit)',
    modern(t, 'tools/call', {
      name: 'bulk_update_records',
      arguments: { collection: 'deep', count: 1, patch: { a: nest(100) } },
    }),
  );
  mayCreate(
    'long: 500 KB report name',
    modern(t, 'tools/call', {
      name: 'generate_report',
      arguments: { report: 'r'.repeat(500_000) },
    }),
  );

  // --- Wrong content types and methods
  const ping = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} });
  for (const type of [
    undefined,
    'text/plain',
    'application/x-www-form-urlencoded',
    'multipart/form-data; boundary=x',
    'application/xml',
    'application/json-patch+json',
    'application/jsonx',
    'application/json; charset=utf-16',
    'application/json; charset=latin1',
    'application/json; charset=nonsense',
    '*/*',
    'application/json, text/plain',
  ]) {
    const h = headers(t, { 'mcp-protocol-version': '2025-11-25' });
    if (type === undefined) delete h['content-type'];
    else h['content-type'] = type;
    invalid(`content type: ${type ?? 'missing'}`, {
      headers: h,
      body: type?.includes('utf-16') ? Buffer.from(ping, 'utf16le') : ping,
    });
  }
  invalid('content encoding: gzip with garbage', {
    headers: headers(t, { 'content-encoding': 'gzip' }),
    body: Buffer.from('not gzip at all'),
  });
  invalid('content encoding: br', {
    headers: headers(t, { 'content-encoding': 'br' }),
    body: Buffer.from(ping),
  });
  invalid('content encoding: gzip bomb (20 MB of spaces)', {
    headers: headers(t, { 'content-encoding': 'gzip' }),
    body: gzipSync(Buffer.alloc(20 * 1024 * 1024, 0x20)),
  });
  invalid('content encoding: deflate of a valid tools/list', {
    headers: headers(t, { 'content-encoding': 'deflate', 'mcp-protocol-version': '2025-11-25' }),
    body: deflateSync(Buffer.from(ping)),
  });
  for (const method of ['GET', 'PUT', 'DELETE', 'PATCH', 'OPTIONS']) {
    invalid(`method ${method}`, {
      method,
      headers: headers(t),
      ...(method === 'GET' || method === 'DELETE' || method === 'OPTIONS' ? {} : { body: ping }),
    });
  }
  invalid('accept: only text/html', {
    headers: headers(t, { accept: 'text/html', 'mcp-protocol-version': '2025-11-25' }),
    body: ping,
  });

  // --- Unicode edge cases in tool arguments (well-formed: they may start tasks)
  NASTY_STRINGS.forEach((s, i) => {
    mayCreate(
      `unicode #${i} in a patch value`,
      modern(t, 'tools/call', {
        name: 'bulk_update_records',
        arguments: { collection: 'unicode', count: 1, patch: { v: s, i } },
      }),
    );
    mayCreate(
      `unicode #${i} as a patch key`,
      modern(t, 'tools/call', {
        name: 'bulk_update_records',
        arguments: { collection: 'unicode-keys', count: 1, patch: { [s || 'empty']: i } },
      }),
    );
    mayCreate(
      `unicode #${i} in a report name`,
      modern(t, 'tools/call', {
        name: 'generate_report',
        arguments: { report: s || 'empty', rows: i + 1 },
      }),
    );
    mayCreate(
      `unicode #${i} in services (legacy wire)`,
      legacy(t, 'tools/call', {
        name: 'provision_test_environment',
        arguments: { branch: s || 'b', services: [s || 's'] },
      }),
    );
    // Most of these fail the collection pattern; the few that match it are ordinary starts.
    const collection = `c${s}x`;
    (/^[\w.-]+$/.test(collection) && collection.length <= 100 ? mayCreate : invalid)(
      `unicode #${i} in a collection name`,
      modern(t, 'tools/call', {
        name: 'bulk_update_records',
        arguments: { collection, count: 1, patch: { a: 1 } },
      }),
    );
    mayCreate(`unicode #${i} as an idempotency key`, {
      ...modern(t, 'tools/call', { name: 'generate_report', arguments: { report: `idem-${i}` } }),
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: {
          name: 'generate_report',
          arguments: { report: `idem-${i}` },
          _meta: { ...META_2026, 'io.mcp-task-gateway/idempotency-key': s },
        },
      }),
    });
  });
  invalid('unicode: raw bytes in the Idempotency-Key header', {
    ...modern(t, 'tools/list', {}),
    headers: { ...modern(t, 'tools/list', {}).headers, 'idempotency-key': 'caf\u00e9\u00ff' },
  });
  invalid('unicode: raw bytes in the Mcp-Name header', {
    ...modern(t, 'tasks/get', { taskId: env.taskId }),
    headers: {
      ...modern(t, 'tasks/get', { taskId: env.taskId }).headers,
      'mcp-name': '\u00ff\u00fe',
    },
  });

  // --- Forged and broken tokens
  const claims = (o: Record<string, unknown> = {}): JWTPayload => ({
    ...userClaims({ issuer: env.issuer, audience: env.mcpUrl, sub: 'fuzz', tenant: 'fuzz-tenant' }),
    ...o,
  });
  const now = Math.floor(Date.now() / 1000);
  const start = (token: string) =>
    modern(token, 'tools/call', {
      name: 'bulk_update_records',
      arguments: { collection: 'forged', count: 1, patch: { a: 1 } },
    });
  const forged: Array<[string, string]> = [
    ['alg none', unsecuredToken(claims(), { kid: env.idpKey.kid })],
    ['alg none without signature dot', unsecuredToken(claims()).slice(0, -1)],
    ['HS256 keyed with the public JWK', await hmacWithPublicKey(claims(), env.publicJwk)],
    ['foreign key, unknown kid', await signToken(claims(), env.foreignKey, { kid: 'nope' })],
    [
      'foreign key, the IdP kid',
      await signToken(claims(), env.foreignKey, { kid: env.idpKey.kid }),
    ],
    ['no kid', await signToken(claims(), env.foreignKey, { kid: null })],
    [
      'kid path traversal',
      await signToken(claims(), env.foreignKey, { kid: '../../../../dev/null' }),
    ],
    ['kid SQL', await signToken(claims(), env.foreignKey, { kid: "' OR 1=1 --" })],
    [
      'expired an hour ago',
      await signToken(claims({ exp: now - 3600, iat: now - 7200 }), env.idpKey),
    ],
    ['nbf an hour ahead', await signToken(claims({ nbf: now + 3600 }), env.idpKey)],
    ['iat an hour ahead', await signToken(claims({ iat: now + 3600 }), env.idpKey)],
    ['wrong issuer', await signToken(claims({ iss: 'https://evil.example' }), env.idpKey)],
    [
      'issuer with a trailing slash',
      await signToken(claims({ iss: `${env.issuer}/` }), env.idpKey),
    ],
    ['wrong audience', await signToken(claims({ aud: 'https://other.example/mcp' }), env.idpKey)],
    ['audience array without us', await signToken(claims({ aud: ['a', 'b'] }), env.idpKey)],
    ['missing sub', await signToken(claims({ sub: undefined }), env.idpKey)],
    ['missing tenant', await signToken(claims({ tenant: undefined }), env.idpKey)],
    ['missing exp', await signToken(claims({ exp: undefined }), env.idpKey)],
    [
      'missing client_id and azp',
      await signToken(claims({ client_id: undefined, azp: undefined }), env.idpKey),
    ],
    ['scope not a string', await signToken(claims({ scope: ['records:write'] }), env.idpKey)],
    ['tenant an object', await signToken(claims({ tenant: { $ne: '' } }), env.idpKey)],
    ['exp a string', await signToken(claims({ exp: 'tomorrow' }), env.idpKey)],
    ['typ JWT', await signToken(claims(), env.idpKey, { typ: 'JWT' })],
    ['tampered payload', tamper(t)],
    ['signature stripped', t.split('.').slice(0, 2).join('.') + '.'],
    ['two segments', t.split('.').slice(0, 2).join('.')],
    ['five segments (JWE-shaped)', 'a.b.c.d.e'],
    ['not base64url', '!!!.@@@.###'],
    ['header not JSON', `${Buffer.from('not json').toString('base64url')}.e30.sig`],
    ['100 KB token', 'a'.repeat(100_000)],
    ['unicode token', 'ä.ö.ü'],
  ];
  for (const [name, token] of forged) invalid(`token: ${name}`, start(token));
  // Signed by the trusted key with every claim right: odd, but a valid principal.
  mayCreate(
    'token: sub with RTL override and zero-width joiner',
    start(await signToken(claims({ sub: 'a\u202e\u200db' }), env.idpKey)),
  );
  invalid('token: Basic scheme', {
    ...start(t),
    headers: {
      ...start(t).headers,
      authorization: `Basic ${Buffer.from('a:b').toString('base64')}`,
    },
  });
  invalid('token: two Bearer values', {
    ...start(t),
    headers: { ...start(t).headers, authorization: `Bearer ${t} ${t}` },
  });
  invalid('token: empty Bearer', {
    ...start(t),
    headers: { ...start(t).headers, authorization: 'Bearer ' },
  });
  invalid('token: none at all', {
    ...start(t),
    headers: headers(undefined, {
      'mcp-protocol-version': '2026-07-28',
      'mcp-method': 'tools/call',
    }),
  });
  return cases;
}

function nest(depth: number): unknown {
  let v: unknown = 1;
  for (let i = 0; i < depth; i++) v = { n: v };
  return v;
}

function tamper(token: string): string {
  const [h, p, s] = token.split('.');
  const claims = JSON.parse(Buffer.from(p!, 'base64url').toString('utf8')) as Record<
    string,
    unknown
  >;
  return `${h}.${Buffer.from(JSON.stringify({ ...claims, tenant: 'other' })).toString('base64url')}.${s}`;
}

/** Security Event Tokens that must all be refused by POST /ssf/events. */
export async function buildSetCorpus(
  env: CorpusEnv & { victim: { sub: string; tenant: string } },
): Promise<FuzzCase[]> {
  const now = Math.floor(Date.now() / 1000);
  const set = (o: Record<string, unknown> = {}): JWTPayload => ({
    iss: env.issuer,
    aud: env.mcpUrl,
    jti: crypto.randomUUID(),
    iat: now,
    sub_id: { format: 'iss_sub', iss: env.issuer, sub: env.victim.sub, tenant: env.victim.tenant },
    tenant: env.victim.tenant,
    events: {
      'https://schemas.openid.net/secevent/risc/event-type/account-disabled': { reason: 'fuzz' },
    },
    ...o,
  });
  const typ = { typ: 'secevent+jwt' };
  const bodies: Array<[string, string | Buffer, string?]> = [
    ['alg none', unsecuredToken(set(), typ)],
    ['HS256 with the public JWK', await hmacWithPublicKey(set(), env.publicJwk)],
    ['foreign key', await signToken(set(), env.foreignKey, typ)],
    [
      'foreign key with the IdP kid',
      await signToken(set(), env.foreignKey, { ...typ, kid: env.idpKey.kid }),
    ],
    ['wrong issuer', await signToken(set({ iss: 'https://evil.example' }), env.idpKey, typ)],
    ['wrong audience', await signToken(set({ aud: 'https://other.example' }), env.idpKey, typ)],
    ['iat a day old', await signToken(set({ iat: now - 86_400 }), env.idpKey, typ)],
    ['iat a day ahead', await signToken(set({ iat: now + 86_400 }), env.idpKey, typ)],
    ['no jti', await signToken(set({ jti: undefined }), env.idpKey, typ)],
    ['no events', await signToken(set({ events: undefined }), env.idpKey, typ)],
    ['events an array', await signToken(set({ events: ['x'] }), env.idpKey, typ)],
    ['typ JWT', await signToken(set(), env.idpKey, { typ: 'JWT' })],
    ['typ at+jwt (an access token pushed as a SET)', env.goodToken],
    [
      'subject of another issuer',
      await signToken(
        set({ sub_id: { format: 'iss_sub', iss: 'https://evil.example', sub: env.victim.sub } }),
        env.idpKey,
        typ,
      ),
    ],
    [
      'subject format unknown',
      await signToken(
        set({ sub_id: { format: 'phone_number', phone_number: '+1 555' } }),
        env.idpKey,
        typ,
      ),
    ],
    [
      'subject with NUL',
      await signToken(
        set({
          iss: 'https://evil.example',
          sub_id: { format: 'iss_sub', iss: env.issuer, sub: 'a\u0000b' },
        }),
        env.idpKey,
        typ,
      ),
    ],
    ['not a JWT', 'hello'],
    ['empty', ''],
    ['40 KB', 'a'.repeat(40_000)],
    ['invalid UTF-8', Buffer.from([0xff, 0xfe, 0x2e, 0xff, 0x2e, 0xff])],
    ['JSON instead of a JWT', JSON.stringify(set()), 'application/json'],
    [
      'right SET, wrong content type',
      await signToken(set({ iss: 'https://evil.example' }), env.idpKey, typ),
      'text/plain',
    ],
  ];
  return bodies.map(([name, body, type]) => ({
    name: `SET: ${name}`,
    kind: 'invalid' as const,
    path: '/ssf/events',
    headers: { 'content-type': type ?? 'application/secevent+jwt', accept: 'application/json' },
    body,
  }));
}
