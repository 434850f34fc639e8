import { fork } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseConfig, ConfigError } from '@mtg/config';
import { idpConfigSchema } from '../src/config.ts';

const mainFile = fileURLToPath(new URL('../src/main.ts', import.meta.url));

describe('configuration', () => {
  test('defaults follow the contract ports', () => {
    const config = parseConfig(idpConfigSchema, { GATEWAY_PORT: '3100' });
    expect(config).toMatchObject({
      IDP_PORT: 9400,
      IDP_HOST: '127.0.0.1',
      GATEWAY_RESOURCE: 'http://127.0.0.1:3100/mcp',
      WORKER_RESOURCE: 'urn:mcp-task-gateway:worker',
      DOWNSTREAM_RESOURCE: 'http://127.0.0.1:9500',
      IDP_ACCESS_TOKEN_TTL: 3600,
    });
    expect(config.IDP_ISSUER).toBeUndefined();
  });

  test('client secrets must name every client', () => {
    expect(() =>
      parseConfig(idpConfigSchema, { IDP_CLIENT_SECRETS: JSON.stringify({ 'mcp-agent': 's' }) }),
    ).toThrow(ConfigError);
    try {
      parseConfig(idpConfigSchema, { IDP_CLIENT_SECRETS: JSON.stringify({ 'mcp-agent': 's' }) });
    } catch (error) {
      expect((error as ConfigError).issues[0]).toMatchObject({ variable: 'IDP_CLIENT_SECRETS' });
      expect((error as ConfigError).issues[0]!.message).toContain('mcp-worker');
    }
  });

  test('IDP_EXCHANGE_TARGETS names static clients and known resources only', () => {
    const targets = { 'mcp-worker': ['http://127.0.0.1:9500', 'urn:mcp-task-gateway:worker'] };
    expect(
      parseConfig(idpConfigSchema, { IDP_EXCHANGE_TARGETS: JSON.stringify(targets) })
        .IDP_EXCHANGE_TARGETS,
    ).toEqual(targets);
    for (const bad of [
      'not json',
      JSON.stringify({ 'mcp-wroker': ['http://127.0.0.1:9500'] }),
      JSON.stringify({ 'mcp-worker': ['https://elsewhere.example'] }),
      JSON.stringify({ 'mcp-worker': 'http://127.0.0.1:9500' }),
    ]) {
      expect(() => parseConfig(idpConfigSchema, { IDP_EXCHANGE_TARGETS: bad })).toThrow(
        /IDP_EXCHANGE_TARGETS/,
      );
    }
  });

  test('a push authorization without a push URL is an error', () => {
    expect(() => parseConfig(idpConfigSchema, { SSF_PUSH_AUTH: 'Bearer x' })).toThrow(
      /SSF_PUSH_AUTH/,
    );
  });
});

describe('main.ts', () => {
  let dataDir: string;
  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'mtg-idp-main-'));
  });
  afterAll(() => rm(dataDir, { recursive: true, force: true }));

  test('reports ready over IPC, uses the dev secrets file, and exits 0 on SIGTERM', async () => {
    const child = fork(mainFile, [], {
      env: { PATH: process.env.PATH ?? '', DATA_DIR: dataDir, IDP_PORT: '0' },
      execArgv: [],
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    });
    let output = '';
    child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const exited = new Promise<number | null>((resolve) =>
      child.on('exit', (code) => resolve(code)),
    );

    const ready = await new Promise<{ type: string; service: string; url: string }>(
      (resolve, reject) => {
        child.once('message', (m) => resolve(m as { type: string; service: string; url: string }));
        child.once('exit', () => reject(new Error(`exited before ready:\n${output}`)));
      },
    );
    expect(ready).toMatchObject({ type: 'ready', service: 'idp' });
    const metadata = (await (
      await fetch(`${ready.url}/.well-known/openid-configuration`)
    ).json()) as {
      issuer: string;
    };
    expect(metadata.issuer).toBe(ready.url);
    const secrets = JSON.parse(await readFile(path.join(dataDir, 'dev-secrets.json'), 'utf8'));
    expect(Object.keys(secrets.clientSecrets)).toEqual([
      'mcp-agent',
      'mcp-agent-2',
      'mcp-gateway',
      'mcp-worker',
    ]);

    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    // Every line it wrote is JSON.
    for (const line of output.trim().split('\n')) expect(() => JSON.parse(line)).not.toThrow();
  });
});
