import { spawn } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));

/** Runs an app's main.ts with `env` and returns its exit code and stderr. */
function runMain(
  app: 'gateway' | 'worker' | 'idp',
  env: Record<string, string>,
): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [`apps/${app}/src/main.ts`], {
      cwd: root,
      env: {
        PATH: process.env.PATH,
        // Valid for everything but UPSTREAMS_FILE, which is read before any connection.
        DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none',
        CLIENT_SECRET: 'not-used',
        CREDENTIAL_KEY: Buffer.alloc(32, 7).toString('base64'),
        LOG_LEVEL: 'error',
        ...env,
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr });
    });
  });
}

describe.each(['gateway', 'worker'] as const)(
  'the %s refuses a bad UPSTREAMS_FILE at start, exit 2, naming the field',
  (app) => {
    test('a field of the wrong kind', async () => {
      const dir = await mkdtemp(path.join(os.tmpdir(), 'mtg-upstreams-bad-'));
      const file = path.join(dir, 'upstreams.yaml');
      await writeFile(
        file,
        'upstreams:\n  demo:\n    url: http://127.0.0.1:1/mcp\n    scope: upstream:demo\n    mode: sometimes\n',
      );
      const r = await runMain(app, { UPSTREAMS_FILE: file });
      expect(r.code).toBe(2);
      expect(r.stderr).toContain(`UPSTREAMS_FILE ${file}: upstreams.demo.mode`);
    });

    test('a file that is not there', async () => {
      const r = await runMain(app, { UPSTREAMS_FILE: '/nonexistent/upstreams.yaml' });
      expect(r.code).toBe(2);
      expect(r.stderr).toContain('UPSTREAMS_FILE /nonexistent/upstreams.yaml: ENOENT');
    });
  },
);
