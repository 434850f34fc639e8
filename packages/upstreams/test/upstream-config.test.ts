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
