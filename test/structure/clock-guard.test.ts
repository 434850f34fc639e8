import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

// The product reads the time of day through one seam, @mtg/clock (docs/architecture.md,
// "Time"): a `Date.now` or an argument-less `new Date` / `Date()` anywhere else in an app's or
// a package's src/ is a time no test can move, so this fails on it (pg-boss keeps the same
// rule with a test of its own). Elapsed durations use performance.now(), which no clock move
// should bend; a time handed in (`new Date(ms)`) is fine. Tools outside the product
// (scripts/, examples/, tests) are not scanned.
const root = fileURLToPath(new URL('../..', import.meta.url));

/** Files that may read the system's time directly, each with its reason. */
const ALLOWED: Record<string, string> = {
  'packages/clock/src/clock.ts': 'the seam itself: systemClock',
  // A stand-in for someone else's MCP server: its task timestamps are its own, not the
  // gateway's, and a test that moves the gateway's clock must not move them.
  'apps/upstream-demo/src/demo-tasks.ts': "the demo upstream's own time",
  'apps/upstream-demo/src/create-upstream-demo.ts': "the demo upstream's own time",
  // Rewritten on another branch at the time of writing; its two reads time a call's duration
  // (performance.now() once the rewrite lands, and this entry goes).
};

/** Every direct read of the system's time in `text`, as 1-based line numbers. */
function timeReads(text: string, file = 'x.ts'): number[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.ES2023, true);
  const lines: number[] = [];
  const isDate = (e: ts.Node) => ts.isIdentifier(e) && e.text === 'Date';
  const visit = (node: ts.Node) => {
    const read =
      (ts.isPropertyAccessExpression(node) &&
        isDate(node.expression) &&
        node.name.text === 'now') ||
      (ts.isNewExpression(node) && isDate(node.expression) && !node.arguments?.length) ||
      (ts.isCallExpression(node) && isDate(node.expression));
    if (read) lines.push(source.getLineAndCharacterOfPosition(node.getStart()).line + 1);
    ts.forEachChild(node, visit);
  };
  visit(source);
  return lines;
}

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((entry) => {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) return sources(path);
    return /\.(ts|mts)$/.test(entry) && !/\.test\.ts$/.test(entry) ? [path] : [];
  });
}

const workspaces = ['apps', 'packages'].flatMap((top) =>
  readdirSync(join(root, top)).map((name) => join(root, top, name, 'src')),
);
const files = workspaces
  .filter((dir) => statSync(dir, { throwIfNoEntry: false })?.isDirectory())
  .flatMap(sources)
  .map((path) => relative(root, path));

test('the detector sees each way of reading the time, and not a time handed in', () => {
  const text = [
    'const a = Date.now();',
    'const b = new Date();',
    'const c = new Date;',
    'const d = Date();',
    'const e = options.now ?? Date.now;',
    'const f = new Date(0); const g = new Date(a); // Date.now() in a comment',
    "const h = 'Date.now()';",
  ].join('\n');
  expect(timeReads(text)).toEqual([1, 2, 3, 4, 5]);
});

test('no app or package reads the time of day but through @mtg/clock', () => {
  const offenders = files
    .filter((file) => !(file in ALLOWED))
    .flatMap((file) =>
      timeReads(readFileSync(join(root, file), 'utf8'), file).map((line) => `${file}:${line}`),
    );
  expect(offenders).toEqual([]);
});

test('every allowed file still reads the time (a stale entry goes)', () => {
  const stale = Object.keys(ALLOWED).filter(
    (file) => timeReads(readFileSync(join(root, file), 'utf8'), file).length === 0,
  );
  expect(stale).toEqual([]);
});
