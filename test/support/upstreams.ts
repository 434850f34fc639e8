import http from 'node:http';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createRemoteJWKSet } from 'jose';
import {
  createUpstreamDemo,
  type RecordedCall,
  type RecordedSession,
} from '@mtg/app-upstream-demo';
import { freePort, type Stack } from './stack.ts';

/**
 * Upstream MCP servers for a stack: the demo upstream (apps/upstream-demo, verifying its own
 * tokens) in this process, and optionally @modelcontextprotocol/server-everything as a child
 * process. Ports are chosen first so UPSTREAMS_FILE can be handed to startStack; `start`
 * serves them once the IdP is up.
 */
export async function planUpstreams(
  options: {
    everything?: boolean;
    demoStepMs?: number;
    /** More upstream entries (a function: given the demo's URL). */
    extra?: string | ((urls: { demoUrl: string }) => string);
    /** A second demo upstream, `modern` (prefix `modern.`), offering the 2026-07-28 tasks wire. */
    modern?: boolean;
  } = {},
) {
  const demoPort = await freePort();
  const modernPort = options.modern ? await freePort() : undefined;
  const modernUrl = modernPort ? `http://127.0.0.1:${modernPort}/mcp` : undefined;
  const everythingPort = options.everything ? await freePort() : undefined;
  const demoUrl = `http://127.0.0.1:${demoPort}/mcp`;
  const everythingUrl = everythingPort ? `http://127.0.0.1:${everythingPort}/mcp` : undefined;
  const dir = await mkdtemp(path.join(os.tmpdir(), 'mtg-upstreams-'));
  const file = path.join(dir, 'upstreams.yaml');
  await writeFile(
    file,
    [
      'upstreams:',
      '  demo:',
      `    url: ${demoUrl}`,
      '    prefix: demo.',
      '    scope: upstream:demo',
      '    breakerThreshold: 2',
      '    breakerCooldownMs: 1000',
      '    timeoutMs: 5000',
      '    tools:',
      '      export_ledger: { mode: task }',
      ...(everythingUrl
        ? [
            '  everything:',
            `    url: ${everythingUrl}`,
            '    prefix: ev.',
            '    scope: upstream:everything',
            '    include: [echo, get-sum, simulate-research-query, trigger-long-running-operation]',
            '    tools:',
            '      trigger-long-running-operation: { mode: task }',
          ]
        : []),
      ...(modernUrl
        ? [
            '  modern:',
            `    url: ${modernUrl}`,
            '    prefix: modern.',
            '    scope: upstream:demo',
            '    timeoutMs: 5000',
          ]
        : []),
      typeof options.extra === 'function' ? options.extra({ demoUrl }) : (options.extra ?? ''),
    ].join('\n'),
  );
  let server: http.Server | undefined;
  let demo: ReturnType<typeof createUpstreamDemo> | undefined;
  let modern: ReturnType<typeof createUpstreamDemo> | undefined;
  let modernServer: http.Server | undefined;
  let everything: ChildProcess | undefined;
  // The IdP's port is chosen when the stack starts, after the upstreams: bound late.
  let issuer = '';
  let keys: ReturnType<typeof createRemoteJWKSet> | undefined;
  const startDemo = async () => {
    demo = createUpstreamDemo({
      resource: demoUrl,
      issuer: () => issuer,
      keys: (header, token) => {
        keys ??= createRemoteJWKSet(new URL(`${issuer}/jwks`));
        return keys(header, token);
      },
      stepMs: options.demoStepMs ?? 300,
    });
    server = http.createServer(demo.app);
    await new Promise<void>((r) => server!.listen(demoPort, '127.0.0.1', () => r()));
    if (modernPort && !modern) {
      modern = createUpstreamDemo({
        resource: modernUrl!,
        issuer: () => issuer,
        keys: (header, token) => {
          keys ??= createRemoteJWKSet(new URL(`${issuer}/jwks`));
          return keys(header, token);
        },
        stepMs: options.demoStepMs ?? 300,
        tasksWire: '2026-07-28',
      });
      modernServer = http.createServer(modern.app);
      await new Promise<void>((r) => modernServer!.listen(modernPort, '127.0.0.1', () => r()));
    }
  };
  /** Approves a change on a demo upstream (its approve_change task leaves input_required). */
  const approve = async (url: string, change: string) => {
    const r = await fetch(new URL('/_approve', url), {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ change }),
    });
    if (!r.ok) throw new Error(`approve ${change}: HTTP ${r.status}`);
    return ((await r.json()) as { resumed: number }).resumed;
  };
  return {
    file,
    demoUrl,
    everythingUrl,
    modernUrl,
    approve: (change: string, url = demoUrl) => approve(url, change),
    /** What the (2025-11-25) demo upstream was asked. */
    demoCalls(): RecordedCall[] {
      return demo?.calls ?? [];
    },
    /** What the 2026-07-28 demo upstream was asked. */
    modernCalls(): RecordedCall[] {
      return modern?.calls ?? [];
    },
    /** Serves the upstreams; before startStack, so the gateway lists them at start. */
    async start() {
      await startDemo();
      if (everythingPort) {
        everything = spawn(
          process.execPath,
          [
            path.resolve('node_modules/@modelcontextprotocol/server-everything/dist/index.js'),
            'streamableHttp',
          ],
          { env: { ...process.env, PORT: String(everythingPort) }, stdio: 'ignore' },
        );
        for (let i = 0; i < 100; i++) {
          const up = await fetch(`http://127.0.0.1:${everythingPort}/mcp`, { method: 'GET' })
            .then(() => true)
            .catch(() => false);
          if (up) break;
          await new Promise((r) => setTimeout(r, 100));
        }
      }
    },
    calls(): RecordedCall[] {
      return demo?.calls ?? [];
    },
    /** Sessions the demo upstream opened since it last (re)started. */
    sessions(): RecordedSession[] {
      return demo?.sessions ?? [];
    },
    async stopDemo() {
      demo?.close();
      await new Promise<void>((r) => {
        server?.close(() => r());
        server?.closeAllConnections();
      });
    },
    /** Hand to startStack's onIssuer: the IdP the demo upstream trusts. */
    trust(value: string) {
      issuer = value;
    },
    restartDemo: () => startDemo(),
    async close(_stack?: Stack) {
      everything?.kill('SIGTERM');
      demo?.close();
      modern?.close();
      await new Promise<void>((r) => {
        if (!modernServer?.listening) return r();
        modernServer.close(() => r());
        modernServer.closeAllConnections();
      });
      await new Promise<void>((r) => {
        if (!server?.listening) return r();
        server.close(() => r());
        server.closeAllConnections();
      });
    },
  };
}
