import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

// What a middleware hands to the routes after it — the correlation id, the client's address,
// trace ids, the verified caller, the console session — goes through a typed accessor kept by
// response (apps/gateway/src/http/request-context.ts, request-meta.ts and their like), never
// through Express's `res.locals`, whose every entry is `any`: a reader there gets no type, and
// a renamed key reads undefined without a compiler error.
const root = fileURLToPath(new URL('../..', import.meta.url));

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((entry) => {
    const path = join(dir, entry);
    if (entry === 'node_modules') return [];
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return entry.endsWith('.ts') ? [path] : [];
  });
}

/** `x.locals` and `x['locals']` in one file, as line numbers (comments do not count). */
function localsUses(file: string): number[] {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest);
  const lines: number[] = [];
  const visit = (node: ts.Node) => {
    const named =
      (ts.isPropertyAccessExpression(node) && node.name.text === 'locals') ||
      (ts.isElementAccessExpression(node) &&
        ts.isStringLiteral(node.argumentExpression) &&
        node.argumentExpression.text === 'locals');
    if (named) lines.push(source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1);
    ts.forEachChild(node, visit);
  };
  visit(source);
  return lines;
}

test('no app or package source reads or writes res.locals', () => {
  const sources = ['apps', 'packages'].flatMap((top) =>
    readdirSync(join(root, top))
      .map((w) => join(root, top, w, 'src'))
      .filter((src) => statSync(src, { throwIfNoEntry: false })?.isDirectory())
      .flatMap(sourceFiles),
  );
  expect(sources.length).toBeGreaterThan(100);
  const uses = sources.flatMap((file) =>
    localsUses(file).map((line) => `${relative(root, file)}:${line}`),
  );
  expect(uses).toEqual([]);
});
