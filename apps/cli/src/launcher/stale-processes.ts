import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Logger } from '@mtg/log';

/**
 * `<DATA_DIR>/launcher.json` names the running launcher and its children. Children run in
 * their own sessions, so a SIGKILLed launcher leaves them running and holding their ports;
 * the next start reads this file and stops them. (The embedded PostgreSQL has its own
 * recovery in @mtg/db.)
 */
const FILE = 'launcher.json';

interface State {
  launcherPid: number;
  children: { pid: number; module: string }[];
}

export class LauncherRunningError extends Error {
  readonly code = 'launcher_running';
  constructor(pid: number, dataDir: string) {
    super(
      `another launcher (pid ${pid}) is running with DATA_DIR ${dataDir}. Stop it first ` +
        '(Ctrl-C in its terminal, or kill -TERM it), or set DATA_DIR and the ports to run a second stack.',
    );
    this.name = 'LauncherRunningError';
  }
}

export async function stopStaleProcesses(dataDir: string, logger: Logger): Promise<void> {
  let state: State;
  try {
    state = JSON.parse(readFileSync(path.join(dataDir, FILE), 'utf8')) as State;
  } catch {
    return;
  }
  if (state.launcherPid !== process.pid && isLauncher(commandOf(state.launcherPid))) {
    throw new LauncherRunningError(state.launcherPid, dataDir);
  }
  // The command line guards against a pid reused by an unrelated process since.
  const left = state.children.filter((c) => commandOf(c.pid)?.includes(c.module));
  if (left.length > 0) {
    logger.warn('stopping processes left running by a previous launcher', {
      pids: left.map((c) => c.pid),
    });
    for (const c of left) signal(c.pid, 'SIGTERM');
    const deadline = performance.now() + 10_000;
    while (left.some((c) => alive(c.pid)) && performance.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
    }
    for (const c of left) signal(c.pid, 'SIGKILL');
  }
  rmSync(path.join(dataDir, FILE), { force: true });
}

/** Keeps launcher.json in step with the running children. */
export function recordProcesses(dataDir: string) {
  const children = new Map<number, string>();
  let written = false;
  const write = () => {
    written = true;
    const state: State = {
      launcherPid: process.pid,
      children: [...children].map(([pid, module]) => ({ pid, module })),
    };
    writeFileSync(path.join(dataDir, FILE), JSON.stringify(state, null, 2) + '\n');
  };
  return {
    started(pid: number | undefined, module: string) {
      if (pid === undefined) return;
      children.set(pid, module);
      write();
    },
    exited(pid: number | undefined) {
      if (pid === undefined) return;
      children.delete(pid);
      write();
    },
    /** Called after a clean stop: nothing is left to recover. */
    clear() {
      if (written) rmSync(path.join(dataDir, FILE), { force: true });
    },
  };
}

/** `mcp-task-gateway dev` (or the repository's `npm start`, or the old scripts/start.ts). */
function isLauncher(command: string | undefined): boolean {
  return (
    !!command &&
    (/\bstart\.ts\b/.test(command) || /(mcp-task-gateway|main\.[jt]s) dev\b/.test(command))
  );
}

function commandOf(pid: number): string | undefined {
  if (!alive(pid)) return undefined;
  try {
    if (process.platform === 'linux') {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ');
    }
    return execFileSync('ps', ['-o', 'command=', '-p', String(pid)], { encoding: 'utf8' });
  } catch {
    return undefined;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function signal(pid: number, sig: NodeJS.Signals) {
  try {
    process.kill(pid, sig);
  } catch {
    // gone
  }
}
