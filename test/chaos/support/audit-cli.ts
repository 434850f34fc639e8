import { execFile } from 'node:child_process';
import path from 'node:path';
import { REPO_ROOT } from '../../../scripts/bench/lib/process-stack.ts';

/** The CLI against the cluster, with one DATA_DIR so checkpoint and verify share the dev key. */
export function auditCli(
  args: string[],
  databaseUrl: string,
  dataDir: string,
  env: Record<string, string> = {},
): Promise<{ code: number; out: string }> {
  return new Promise((resolve) =>
    execFile(
      process.execPath,
      [path.join(REPO_ROOT, 'apps/cli/src/main.ts'), ...args],
      {
        cwd: REPO_ROOT,
        env: { ...process.env, DATABASE_URL: databaseUrl, DATA_DIR: dataDir, ...env },
        timeout: 120_000,
        maxBuffer: 16 * 1024 * 1024,
      },
      (error, stdout, stderr) =>
        resolve({
          code: error ? Number((error as { code?: number }).code ?? 1) : 0,
          out: `${stdout}${stderr}`,
        }),
    ),
  );
}
