// The one binary: `mcp-task-gateway <command>` runs each process and operator command.
import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);
const CLI = fileURLToPath(new URL('../../apps/cli/src/main.ts', import.meta.url));
const cli = (args: string[], cwd?: string) =>
  run(process.execPath, [CLI, ...args], { cwd, env: { ...process.env } }).then(
    (r) => ({ code: 0, ...r }),
    (e: { code: number; stdout: string; stderr: string }) => e,
  );
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'mtg-cli-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

test('--version prints the package version, help lists every command', async () => {
  const manifest = JSON.parse(
    await readFile(new URL('../../apps/cli/package.json', import.meta.url), 'utf8'),
  ) as { version: string };
  expect((await cli(['--version'])).stdout.trim()).toBe(manifest.version);
  const help = (await cli(['help'])).stdout;
  for (const command of [
    'init',
    'dev',
    'gateway',
    'worker',
    'console',
    'migrate',
    'audit verify',
    'token',
  ])
    expect(help).toContain(`  ${command} `);
});

test('an unknown command exits 2 naming it', async () => {
  const answer = await cli(['deploy', 'now']);
  expect(answer.code).toBe(2);
  expect(answer.stderr).toContain('unknown command "deploy now"');
});

test('audit words pick their command: audit verify is the verifier, not the queries', async () => {
  const answer = await cli(['audit', 'verify', '--help']);
  expect(answer.stdout + answer.stderr).toMatch(/audit:verify|usage: .*audit:verify/);
});

test('init writes a pack with its tools, targets, test and README, named after its directory', async () => {
  const answer = await cli(['init', 'notes-tools'], dir);
  expect(answer.code).toBe(0);
  expect(answer.stdout).toContain('npm install\n  npm test\n  npx mcp-task-gateway dev');
  const pack = path.join(dir, 'notes-tools');
  expect((await readdir(pack, { recursive: true })).sort()).toEqual(
    expect.arrayContaining([
      '.gitignore',
      'README.md',
      'deploy/targets.yaml',
      'package.json',
      'src/index.ts',
      'src/tools/count-words.ts',
      'src/tools/import-notes.ts',
      'test/tools.test.ts',
    ]),
  );
  const manifest = JSON.parse(await readFile(path.join(pack, 'package.json'), 'utf8'));
  expect(manifest.name).toBe('notes-tools');
  expect(manifest.dependencies['@mtg/tool-kit']).toMatch(/^\^\d+\.\d+\.\d+$/);
  expect(await readFile(path.join(pack, 'src/index.ts'), 'utf8')).toContain("name: 'notes-tools'");
  const readme = await readFile(path.join(pack, 'README.md'), 'utf8');
  for (const step of ['npm install', 'npm test', 'npx mcp-task-gateway dev'])
    expect(readme).toContain(step);
});

test('init refuses a directory that is not empty, and a name npm would refuse', async () => {
  await writeFile(path.join(dir, 'taken'), 'x');
  const full = await cli(['init', '.'], dir);
  expect(full.code).toBe(2);
  expect(full.stderr).toContain('exists and is not empty');
  const bad = await cli(['init', 'x', '--name', 'Not A Name'], dir);
  expect(bad.code).toBe(2);
  expect(bad.stderr).toContain('not a valid npm package name');
});
