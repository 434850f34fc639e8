// UPSTREAMS_FILE replaces the demo upstream's registration; the launcher says so at start,
// naming the file, since the demo.* tools and the upstream:demo scope vanish otherwise silently.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { chooseUpstreamsFile } from '../../apps/cli/src/launcher/upstreams-file.ts';

let dataDir: string;
beforeEach(async () => {
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'mtg-upstreams-'));
});
afterEach(async () => {
  await rm(dataDir, { recursive: true, force: true });
});

function recorder() {
  const lines: Array<{ message: string; meta: unknown }> = [];
  return {
    lines,
    logger: { info: (message: string, meta?: unknown) => lines.push({ message, meta }) },
  };
}

test("the operator's UPSTREAMS_FILE: used as is, and an info line names it and the demo upstream's absence", async () => {
  const { lines, logger } = recorder();
  const file = await chooseUpstreamsFile({
    env: { UPSTREAMS_FILE: '/etc/mtg/upstreams.yaml' },
    dataDir,
    config: { UPSTREAM_DEMO_PORT: 9600 },
    logger: logger as never,
  });
  expect(file).toBe('/etc/mtg/upstreams.yaml');
  expect(lines).toHaveLength(1);
  expect(lines[0]!.message).toMatch(/UPSTREAMS_FILE \/etc\/mtg\/upstreams\.yaml/);
  expect(lines[0]!.message).toMatch(/the demo upstream is not/);
  expect(lines[0]!.message).toMatch(/upstream:demo/);
});

test('unset: the demo upstream is registered from a file in the data directory, without a line', async () => {
  const { lines, logger } = recorder();
  const file = await chooseUpstreamsFile({
    env: {},
    dataDir,
    config: { UPSTREAM_DEMO_PORT: 9611 },
    logger: logger as never,
  });
  expect(file).toBe(path.join(dataDir, 'upstreams.yaml'));
  expect(await readFile(file, 'utf8')).toMatch(
    /url: http:\/\/127\.0\.0\.1:9611\/mcp[\s\S]*scope: upstream:demo/,
  );
  expect(lines).toEqual([]);
});
