import { parseUpstreams, UpstreamConfigError } from '../src/upstream-config.ts';

test('a valid document gets every default, the prefix from the name', () => {
  const [u] = parseUpstreams(
    { upstreams: { 'ci-server': { url: 'http://127.0.0.1:1/mcp', scope: 'ci:run' } } },
    'f.yaml',
  );
  expect(u).toMatchObject({
    name: 'ci-server',
    audience: 'http://127.0.0.1:1/mcp',
    prefix: 'ci_server.',
    mode: 'auto',
    exclude: [],
  });
});

test.each([
  [{ upstreams: { demo: { url: 'ftp://x', scope: 's' } } }, 'upstreams.demo.url'],
  [{ upstreams: { demo: { url: 'http://x/mcp' } } }, 'upstreams.demo.scope'],
  [{ upstreams: { Demo: { url: 'http://x/mcp', scope: 's' } } }, 'upstreams.Demo'],
  [
    { upstreams: { demo: { url: 'http://x/mcp', scope: 's', prefix: 'a b' } } },
    'upstreams.demo.prefix',
  ],
  [
    { upstreams: { demo: { url: 'http://x/mcp', scope: 's', tools: { t: { mode: 'later' } } } } },
    'upstreams.demo.tools.t.mode',
  ],
  [{ upstreams: { demo: { url: 'http://x/mcp', scope: 's', colour: 1 } } }, 'upstreams.demo'],
])('a bad document is refused naming the field (%#)', (doc, field) => {
  try {
    parseUpstreams(doc, 'f.yaml');
    throw new Error('accepted');
  } catch (error) {
    expect(error).toBeInstanceOf(UpstreamConfigError);
    expect((error as UpstreamConfigError).code).toBe('invalid_upstreams');
    expect((error as Error).message).toContain('UPSTREAMS_FILE f.yaml');
    expect((error as Error).message).toContain(field);
  }
});

test('two upstreams may not share a prefix', () => {
  expect(() =>
    parseUpstreams(
      {
        upstreams: {
          a: { url: 'http://x/mcp', scope: 's', prefix: 'p.' },
          b: { url: 'http://y/mcp', scope: 's', prefix: 'p.' },
        },
      },
      'f.yaml',
    ),
  ).toThrow(/upstreams.b.prefix/);
});

test('an empty prefix is refused: an upstream could take every gateway tool name', () => {
  expect(() =>
    parseUpstreams(
      { upstreams: { ev: { url: 'http://x/mcp', scope: 's', prefix: '' } } },
      'f.yaml',
    ),
  ).toThrow(/upstreams\.ev\.prefix: .*empty prefix is refused/);
});

test.each([
  ['ev', 'ev.'],
  ['a.', 'a.b.'],
  ['p.', 'p.'],
  ['a.b.', 'a.'],
  ['ci', 'ci_server.'],
])('prefixes %j and %j overlap and are refused, naming both upstreams', (first, second) => {
  const doc = {
    upstreams: {
      one: { url: 'http://x/mcp', scope: 's', prefix: first },
      two: { url: 'http://y/mcp', scope: 's', prefix: second },
    },
  };
  let message = '';
  try {
    parseUpstreams(doc, 'f.yaml');
  } catch (error) {
    expect(error).toBeInstanceOf(UpstreamConfigError);
    message = (error as Error).message;
  }
  expect(message).toContain('UPSTREAMS_FILE f.yaml: upstreams.two.prefix');
  expect(message).toContain(`upstream one`);
  expect(message).toContain(JSON.stringify(second));
  expect(message).toContain(JSON.stringify(first));
});

test('prefixes that share a start but neither begins the other are accepted', () => {
  const list = parseUpstreams(
    {
      upstreams: {
        a: { url: 'http://x/mcp', scope: 's', prefix: 'ab.' },
        b: { url: 'http://y/mcp', scope: 's', prefix: 'ac.' },
      },
    },
    'f.yaml',
  );
  expect(list.map((u) => u.prefix)).toEqual(['ab.', 'ac.']);
});

test('maxTools defaults to 500 and is bounded', () => {
  const [u] = parseUpstreams({ upstreams: { a: { url: 'http://x/mcp', scope: 's' } } }, 'f.yaml');
  expect(u!.maxTools).toBe(500);
  expect(() =>
    parseUpstreams(
      { upstreams: { a: { url: 'http://x/mcp', scope: 's', maxTools: 0 } } },
      'f.yaml',
    ),
  ).toThrow(/upstreams\.a\.maxTools/);
});
