// Runs scripts/bench/load.ts in a process of its own (on 2 cores an in-process load
// generator would take the server's CPU and distort the very thing measured).
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { LoadResult, LoadSpec } from '../load.ts';

const LOAD = fileURLToPath(new URL('../load.ts', import.meta.url));

export function runLoadProcess(spec: LoadSpec): Promise<LoadResult> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'mtg-load-'));
  const file = path.join(dir, 'spec.json');
  writeFileSync(file, JSON.stringify(spec));
  return new Promise<LoadResult>((resolve, reject) => {
    execFile(
      process.execPath,
      [LOAD, file],
      { maxBuffer: 16 * 1024 * 1024, timeout: (spec.durationS + 60) * 1000 },
      (error, stdout, stderr) => {
        rmSync(dir, { recursive: true, force: true });
        if (error) return reject(new Error(`load generator failed: ${error.message}\n${stderr}`));
        try {
          resolve(JSON.parse(stdout.trim().split('\n').pop()!) as LoadResult);
        } catch {
          reject(new Error(`load generator printed no result: ${stdout}\n${stderr}`));
        }
      },
    );
  });
}
