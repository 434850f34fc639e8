import { fork } from 'node:child_process';
import { forwardLines } from './output-lines.ts';

export interface ReadyMessage {
  type: 'ready';
  service: string;
  url?: string;
}

export interface ChildExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface Child {
  name: string;
  pid: number | undefined;
  /** Resolves on the child's `{ type: 'ready' }` IPC message; rejects if it exits first. */
  ready: Promise<ReadyMessage>;
  exited: Promise<ChildExit>;
  /** The last lines it wrote to stderr, for error messages. */
  stderrTail(): string[];
  /** SIGTERM, then SIGKILL after `graceMs`; resolves when it has exited. */
  terminate(graceMs: number): Promise<ChildExit>;
  /** Sends `signal` (default SIGKILL) if it still runs; does not wait. */
  kill(signal?: NodeJS.Signals): void;
}

export class ChildFailedError extends Error {
  readonly code = 'child_failed';
  readonly child: string;
  constructor(child: string, what: string, stderrTail: string[]) {
    const tail = stderrTail.length ? '\n' + stderrTail.map((l) => '  | ' + l).join('\n') : '';
    super(`${child} ${what}${tail}`);
    this.name = 'ChildFailedError';
    this.child = child;
  }
}

export function describeExit(exit: ChildExit): string {
  return exit.signal ? `was killed by ${exit.signal}` : `exited with code ${exit.code}`;
}

/**
 * Runs `module` on this very Node binary (the pinned one: it strips TypeScript types) with
 * an IPC channel for the ready message. The child gets its own session, so a terminal's
 * Ctrl-C reaches only the launcher, which stops the children in order.
 */
export function startChild(
  name: string,
  module: string,
  env: NodeJS.ProcessEnv,
  options: { readyTimeoutMs: number; args?: string[] },
): Child {
  const proc = fork(module, options.args ?? [], {
    execPath: process.execPath,
    execArgv: [],
    env,
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    detached: true,
  });
  forwardLines(proc.stdout!, process.stdout);
  const stderr = forwardLines(proc.stderr!, process.stderr);
  const stderrEnded = new Promise<void>((resolve) => proc.stderr!.once('close', resolve));

  const exited = new Promise<ChildExit>((resolve) => {
    proc.once('exit', (code, signal) => resolve({ code, signal }));
  });
  const spawnFailed = new Promise<never>((_, reject) => {
    proc.once('error', (error) => {
      if (proc.pid === undefined) {
        reject(new ChildFailedError(name, `did not start: ${error.message}`, []));
      }
    });
  });

  let timer: NodeJS.Timeout | undefined;
  const ready = Promise.race([
    new Promise<ReadyMessage>((resolve) => {
      proc.on('message', (message: unknown) => {
        if (isReady(message)) resolve(message);
      });
    }),
    exited.then(async (exit): Promise<never> => {
      // Quote its last words: stderr may still be draining when 'exit' fires.
      await Promise.race([stderrEnded, new Promise((r) => setTimeout(r, 500).unref())]);
      throw new ChildFailedError(name, `${describeExit(exit)} before it was ready`, stderr.tail());
    }),
    spawnFailed,
    new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(
            new ChildFailedError(
              name,
              `did not report ready within ${options.readyTimeoutMs / 1000} s`,
              stderr.tail(),
            ),
          ),
        options.readyTimeoutMs,
      );
    }),
  ]).finally(() => clearTimeout(timer));
  ready.catch(() => {}); // observed by the caller; do not crash on an unawaited rejection

  const running = () => proc.exitCode === null && proc.signalCode === null;
  return {
    name,
    pid: proc.pid,
    ready,
    exited,
    stderrTail: stderr.tail,
    kill: (signal = 'SIGKILL') => {
      if (running()) proc.kill(signal);
    },
    terminate: async (graceMs) => {
      if (!running()) return exited;
      proc.kill('SIGTERM');
      let timer: NodeJS.Timeout | undefined;
      const inTime = await Promise.race([
        exited.then(() => true),
        new Promise<boolean>((resolve) => {
          timer = setTimeout(() => resolve(false), graceMs);
        }),
      ]);
      clearTimeout(timer);
      if (!inTime) proc.kill('SIGKILL');
      return exited;
    },
  };
}

function isReady(message: unknown): message is ReadyMessage {
  return (
    typeof message === 'object' &&
    message !== null &&
    (message as { type?: unknown }).type === 'ready'
  );
}
