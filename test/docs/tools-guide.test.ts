import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { loadTargets } from '@mtg/tools';

// docs/tools.md may not drift from the API: each TypeScript snippet is an excerpt of a file
// of the example pack (which is type-checked and tested), each YAML snippet a file that the
// targets schema accepts, each shell snippet sets only variables the processes read.
const root = fileURLToPath(new URL('../..', import.meta.url));
const GAP = /^\s*\/\/ …$/;

async function blocks(): Promise<Array<{ lang: string; body: string }>> {
  const text = await readFile(`${root}/docs/tools.md`, 'utf8');
  return [...text.matchAll(/^```(\w+)\n([\s\S]*?)^```$/gm)].map((m) => ({
    lang: m[1]!,
    body: m[2]!,
  }));
}

const trimBlank = (lines: string[]) => {
  while (lines.length && !lines[0]!.trim()) lines.shift();
  while (lines.length && !lines[lines.length - 1]!.trim()) lines.pop();
  return lines.join('\n');
};

test('every TypeScript snippet of docs/tools.md is, piece by piece and in order, in the file it names', async () => {
  const ts = (await blocks()).filter((b) => b.lang === 'ts');
  expect(ts.length).toBeGreaterThanOrEqual(6);
  for (const block of ts) {
    const [first, ...rest] = block.body.split('\n');
    const source = /^\/\/ from (\S+)$/.exec(first ?? '')?.[1];
    expect(source).toBeDefined();
    const file = await readFile(`${root}/${source}`, 'utf8');
    const pieces: string[][] = [[]];
    for (const line of rest) {
      if (GAP.test(line)) pieces.push([]);
      else pieces[pieces.length - 1]!.push(line);
    }
    let from = 0;
    for (const piece of pieces.map(trimBlank).filter(Boolean)) {
      const at = file.indexOf(piece, from);
      if (at < 0)
        throw new Error(`docs/tools.md: a snippet from ${source} no longer matches it:\n${piece}`);
      from = at + piece.length;
    }
  }
});

test('every YAML snippet is a targets file the workers accept, and the example ships it', async () => {
  const yaml = (await blocks()).filter((b) => b.lang === 'yaml');
  expect(yaml.length).toBeGreaterThanOrEqual(1);
  const shipped = await readFile(`${root}/examples/acme-tools/deploy/targets.yaml`, 'utf8');
  const dir = await mkdtemp(`${tmpdir()}/tools-guide-`);
  for (const [i, block] of yaml.entries()) {
    // Through the workers' own loader (it throws a TargetConfigError on a bad document).
    const file = `${dir}/targets-${i}.yaml`;
    await writeFile(file, block.body);
    expect(() =>
      loadTargets({ file, downstreamUrl: 'http://127.0.0.1:1', downstreamResource: 'x' }),
    ).not.toThrow();
    expect(shipped.trim()).toContain(block.body.trim());
  }
});

test('every variable a shell snippet sets is one the gateway or a worker reads', async () => {
  // The zod schemas are refined and transformed (no .shape): read their declarations.
  const schemas = (
    await Promise.all(
      ['apps/gateway/src/config.ts', 'apps/worker/src/worker-config.ts'].map((f) =>
        readFile(`${root}/${f}`, 'utf8'),
      ),
    )
  ).join('\n');
  const known = new Set([...schemas.matchAll(/^\s+([A-Z][A-Z0-9_]+):/gm)].map((m) => m[1]!));
  const sh = (await blocks()).filter((b) => b.lang === 'sh');
  const names = sh.flatMap((b) => [...b.body.matchAll(/\b([A-Z][A-Z0-9_]+)=/g)].map((m) => m[1]!));
  expect(names.length).toBeGreaterThan(0);
  expect(names.filter((n) => !known.has(n))).toEqual([]);
});
