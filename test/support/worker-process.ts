import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Stack } from './stack.ts';

const MAIN = fileURLToPath(new URL('../../apps/worker/src/main.ts', import.meta.url));

/** Starts a real worker process (apps/worker/src/main.ts) against the stack; resolves when ready. */
export async function startWorkerProcess(
  stack: Stack,
  workerId: string,
  extra: Record<string, string> = {},
): Promise<ChildProcess> {
  const child = fork(MAIN, [], {
    execPath: process.execPath,
    execArgv: [],
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    env: {
      PATH: process.env.PATH,
      ...stack.env,
      DATABASE_URL: stack.db.logins.worker,
      CLIENT_ID: 'mcp-worker',
      CLIENT_SECRET: stack.secrets.clientSecrets['mcp-worker'],
      WORKER_ID: workerId,
      LOG_LEVEL: 'warn',
      ...extra,
    },
  });
  await new Promise<void>((resolve, reject) => {
    child.once('message', () => resolve());
    child.once('exit', (code) =>
      reject(new Error(`worker ${workerId} exited with ${code} before ready`)),
    );
  });
  return child;
}

export function waitForExit(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}
