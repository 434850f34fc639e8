import { mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { runMain } from '../support/run-main.ts';

describe.each(['gateway', 'worker'] as const)(
  'the %s refuses a bad UPSTREAMS_FILE at start, exit 2, naming the field',
  (app) => {
    test('a field of the wrong kind', async () => {
      const dir = await mkdtemp(path.join(os.tmpdir(), 'mtg-upstreams-bad-'));
      const file = path.join(dir, 'upstreams.yaml');
      await writeFile(
        file,
        'upstreams:\n  demo:\n    url: http://127.0.0.1:1/mcp\n    scope: upstream:demo\n    mode: sometimes\n',
      );
      const r = await runMain(app, { UPSTREAMS_FILE: file });
      expect(r.code).toBe(2);
      expect(r.stderr).toContain(`UPSTREAMS_FILE ${file}: upstreams.demo.mode`);
    });

    test('overlapping prefixes, naming both upstreams', async () => {
      const dir = await mkdtemp(path.join(os.tmpdir(), 'mtg-upstreams-overlap-'));
      const file = path.join(dir, 'upstreams.yaml');
      await writeFile(
        file,
        [
          'upstreams:',
          '  alpha: { url: "http://127.0.0.1:1/mcp", scope: "upstream:a", prefix: "a." }',
          '  beta: { url: "http://127.0.0.1:2/mcp", scope: "upstream:b", prefix: "a.b." }',
          '',
        ].join('\n'),
      );
      const r = await runMain(app, { UPSTREAMS_FILE: file });
      expect(r.code).toBe(2);
      expect(r.stderr).toContain(
        `UPSTREAMS_FILE ${file}: upstreams.beta.prefix: "a.b." begins with the prefix "a." of upstream alpha`,
      );
    });

    test('a file that is not there', async () => {
      const r = await runMain(app, { UPSTREAMS_FILE: '/nonexistent/upstreams.yaml' });
      expect(r.code).toBe(2);
      expect(r.stderr).toContain('UPSTREAMS_FILE /nonexistent/upstreams.yaml: ENOENT');
    });
  },
);
