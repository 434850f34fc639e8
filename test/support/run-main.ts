import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));

/**
 * Runs an app's main.ts with `env` (over a configuration valid for everything but what the
 * test changes: the database it names is never reached, since what is checked is read first)
 * and returns its exit code and stderr.
 */
export function runMain(
  app: 'gateway' | 'worker' | 'idp' | 'cell-router',
  env: Record<string, string>,
): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [`apps/${app}/src/main.ts`], {
      cwd: root,
      env: {
        PATH: process.env.PATH,
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
    // 'close', not 'exit': after its stderr is read to the end.
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr });
    });
  });
}
