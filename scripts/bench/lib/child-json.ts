import { execFile } from 'node:child_process';

/** Runs a Node script (on this Node) in its own process and parses the JSON it prints last. */
export function runJsonScript<T>(
  script: string,
  args: string[],
  options: { env?: NodeJS.ProcessEnv; timeoutMs?: number } = {},
): Promise<T> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [script, ...args],
      {
        maxBuffer: 16 * 1024 * 1024,
        timeout: options.timeoutMs ?? 120_000,
        env: options.env ?? process.env,
      },
      (error, stdout, stderr) => {
        if (error) return reject(new Error(`${script} failed: ${error.message}\n${stderr}`));
        try {
          resolve(JSON.parse(stdout.trim().split('\n').pop()!) as T);
        } catch {
          reject(new Error(`${script} printed no JSON: ${stdout}\n${stderr}`));
        }
      },
    );
  });
}
