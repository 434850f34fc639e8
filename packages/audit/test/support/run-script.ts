import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const REPO_ROOT = fileURLToPath(new URL('../../../..', import.meta.url));

export interface ScriptResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs one of the repository's scripts (`scripts/audit-verify.ts` …) as a child process on
 * this Node binary, the way `npm run -s` would, with exactly `env` on top of PATH/HOME.
 */
export function runScript(
  script: string,
  args: string[],
  env: Record<string, string>,
  options: { onStdout?: (chunk: string) => void; signal?: AbortSignal } = {},
): Promise<ScriptResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [script, ...args], {
      cwd: REPO_ROOT,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => {
      stdout += c;
      options.onStdout?.(c);
    });
    child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    options.signal?.addEventListener('abort', () => child.kill('SIGTERM'), { once: true });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

export const verifyScript = (args: string[], env: Record<string, string>) =>
  runScript('scripts/audit-verify.ts', args, env);
export const checkpointScript = (args: string[], env: Record<string, string>) =>
  runScript('scripts/audit-checkpoint.ts', args, env);
