import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { CellsFileError, loadCells, parseCells } from '../src/cells-file.ts';
import { runMain } from '../../../test/support/run-main.ts';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'mtg-cells-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const file = async (name: string, text: string) => {
  const p = path.join(dir, name);
  await writeFile(p, text);
  return p;
};

test('a YAML cells file maps tenants to cells, with a default for every other tenant', async () => {
  const cells = loadCells(
    await file(
      'cells.yaml',
      `cells:
  eu-1: { url: "http://10.0.0.1:3000/" }
  eu-2: { url: "https://cell-2.example/base" }
tenants:
  acme: eu-1
  globex: eu-2
default: eu-1
`,
    ),
  );
  expect(cells.cells).toEqual([
    { name: 'eu-1', url: 'http://10.0.0.1:3000' },
    { name: 'eu-2', url: 'https://cell-2.example/base' },
  ]);
  expect(cells.cellOf('globex')?.name).toBe('eu-2');
  expect(cells.cellOf('acme')?.name).toBe('eu-1');
  expect(cells.cellOf('initech')?.name).toBe('eu-1');
  expect(cells.default?.name).toBe('eu-1');
});

test('without a default, a tenant no cell serves has no cell', () => {
  const cells = parseCells(
    { cells: { a: { url: 'http://127.0.0.1:1' } }, tenants: { acme: 'a' } },
    'cells.json',
  );
  expect(cells.cellOf('acme')?.name).toBe('a');
  expect(cells.cellOf('other')).toBeUndefined();
  // Not a prototype property either.
  expect(cells.cellOf('constructor')).toBeUndefined();
});

test.each([
  [{ cells: {} }, 'cells: at least one cell'],
  [{ cells: { a: { url: 'ftp://x' } } }, 'cells.a.url: must be an absolute http(s) URL'],
  [{ cells: { a: { url: 'http://x?q=1' } } }, 'cells.a.url: must have no query or fragment'],
  [{ cells: { A: { url: 'http://x' } } }, 'cells.A: cell names'],
  [
    { cells: { a: { url: 'http://x' } }, tenants: { acme: 'b' } },
    'tenants.acme: names cell "b", which is not in cells',
  ],
  [{ cells: { a: { url: 'http://x' } }, default: 'b' }, 'default: names cell "b"'],
  [{ cells: { a: { url: 'http://x', weight: 2 } } }, 'cells.a: Unrecognized key: "weight"'],
  [undefined, 'cells:'],
])('a bad document is refused naming the field: %j', (doc, message) => {
  expect(() => parseCells(doc, 'f.yaml')).toThrow(CellsFileError);
  expect(() => parseCells(doc, 'f.yaml')).toThrow(`CELLS_FILE f.yaml: ${message}`);
});

test('a tenant named twice, bad YAML and a missing file are refused naming the file', async () => {
  const twice = await file(
    'twice.yaml',
    'cells:\n  a: { url: "http://x" }\ntenants:\n  acme: a\n  acme: a\n',
  );
  expect(() => loadCells(twice)).toThrow(/^CELLS_FILE .*twice\.yaml: not YAML or JSON: .*unique/i);
  const broken = await file('broken.json', '{"cells": ');
  expect(() => loadCells(broken)).toThrow(/broken\.json: not YAML or JSON/);
  expect(() => loadCells(path.join(dir, 'none.yaml'))).toThrow(
    /none\.yaml: cannot be read \(ENOENT\)/,
  );
});

test('the router process exits 2 naming a bad cells file, before reaching anything', async () => {
  const bad = await file('bad.yaml', 'cells:\n  a: { url: "http://x" }\ndefault: z\n');
  const run = await runMain('cell-router', { CELLS_FILE: bad, AUTH_ISSUER: 'http://127.0.0.1:1' });
  expect(run.code).toBe(2);
  expect(run.stderr).toContain(`cell-router: CELLS_FILE ${bad}: default: names cell "z"`);
  const unset = await runMain('cell-router', {});
  expect(unset.code).toBe(2);
  expect(unset.stderr).toContain('CELLS_FILE: ');
});
