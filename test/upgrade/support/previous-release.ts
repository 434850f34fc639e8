import { execFile, spawnSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);
const REPO_ROOT = fileURLToPath(new URL('../../..', import.meta.url));

/** The release the upgrade starts from: its tag, and its commit for clones without tags. */
export const PREVIOUS_RELEASE = { tag: 'v0.1.0', commit: '0477b33' } as const;

/** Why the upgrade test cannot run here (git missing), or undefined when it can. */
export function gitUnavailable(): string | undefined {
  const r = spawnSync('git', ['rev-parse', '--git-dir'], { cwd: REPO_ROOT, encoding: 'utf8' });
  if (r.error) return `git is not available (${r.error.message})`;
  if (r.status !== 0) return `${REPO_ROOT} is not a git checkout: ${r.stderr.trim()}`;
  return undefined;
}

export interface PreviousRelease {
  /** The checkout of the previous release (a detached worktree of this repository). */
  root: string;
  commit: string;
  /** How long `npm ci` took in it. */
  npmCiMs: number;
  remove(): Promise<void>;
}

/**
 * A detached worktree of this repository at the previous release, with its own node_modules
 * (`npm ci --prefer-offline`): its processes run its own code and its own dependencies.
 */
export async function checkOutPreviousRelease(): Promise<PreviousRelease> {
  const commit = await resolveCommit();
  const root = await mkdtemp(path.join(os.tmpdir(), `mtg-${PREVIOUS_RELEASE.tag}-`));
  await run('git', ['worktree', 'add', '--detach', root, commit], { cwd: REPO_ROOT });
  const remove = async () => {
    await run('git', ['worktree', 'remove', '--force', root], { cwd: REPO_ROOT }).catch(() => {});
    await rm(root, { recursive: true, force: true });
    await run('git', ['worktree', 'prune'], { cwd: REPO_ROOT }).catch(() => {});
  };
  try {
    const started = Date.now();
    await run('npm', ['ci', '--prefer-offline', '--no-audit', '--no-fund'], {
      cwd: root,
      env: { ...process.env, npm_config_loglevel: 'error' },
      maxBuffer: 16 * 1024 * 1024,
    });
    return { root, commit, npmCiMs: Date.now() - started, remove };
  } catch (error) {
    await remove();
    throw error;
  }
}

async function resolveCommit(): Promise<string> {
  for (const ref of [PREVIOUS_RELEASE.tag, PREVIOUS_RELEASE.commit]) {
    try {
      const { stdout } = await run('git', ['rev-parse', '--verify', '--quiet', `${ref}^{commit}`], {
        cwd: REPO_ROOT,
      });
      return stdout.trim();
    } catch {
      // not in this clone: try the next
    }
  }
  throw new Error(
    `neither the tag ${PREVIOUS_RELEASE.tag} nor the commit ${PREVIOUS_RELEASE.commit} is in this ` +
      'clone: fetch them (git fetch --tags, or unshallow the clone) to run the upgrade test',
  );
}
