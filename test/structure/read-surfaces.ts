import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const root = fileURLToPath(new URL('../../', import.meta.url));

/** A package's public face: the names its index exports, values and types apart. */
export interface Surface {
  values: string[];
  types: string[];
}

/**
 * Every workspace package's face, read by the TypeScript compiler from its `src/index.ts`
 * (so `export *`, re-exports and type-only exports all count), keyed by package name.
 */
export function readSurfaces(): Record<string, Surface> {
  const dirs = fs
    .readdirSync(path.join(root, 'packages'))
    .filter((d) => fs.existsSync(path.join(root, 'packages', d, 'src/index.ts')))
    .sort();
  const entries = dirs.map((d) => path.join(root, 'packages', d, 'src/index.ts'));
  const program = ts.createProgram(entries, {
    allowImportingTsExtensions: true,
    noEmit: true,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2023,
    skipLibCheck: true,
    noResolve: false,
  });
  const checker = program.getTypeChecker();
  const surfaces: Record<string, Surface> = {};
  dirs.forEach((d, i) => {
    const manifest = JSON.parse(
      fs.readFileSync(path.join(root, 'packages', d, 'package.json'), 'utf8'),
    ) as { name: string };
    const file = program.getSourceFile(entries[i]!)!;
    const surface: Surface = { values: [], types: [] };
    for (const symbol of checker.getExportsOfModule(checker.getSymbolAtLocation(file)!)) {
      const target =
        symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
      const isValue =
        target.flags & ts.SymbolFlags.Value &&
        !(symbol.declarations ?? []).some(
          (decl) =>
            (ts.isExportSpecifier(decl) && (decl.isTypeOnly || decl.parent.parent.isTypeOnly)) ||
            ts.isTypeOnlyImportOrExportDeclaration(decl),
        );
      (isValue ? surface.values : surface.types).push(symbol.name);
    }
    surface.values.sort();
    surface.types.sort();
    surfaces[manifest.name] = surface;
  });
  return surfaces;
}

/**
 * For each package, the names other code imports from its index (`@mtg/x` or a relative
 * path to `packages/x/src/index.ts`): the apps, the other packages, the scripts, the examples,
 * and the tests (a package's own tests included: they use its face, as a caller would).
 */
export function importedNames(): Record<string, Set<string>> {
  const used: Record<string, Set<string>> = {};
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      if (e.name === 'node_modules' || e.name.startsWith('.')) continue;
      const f = path.join(dir, e.name);
      if (e.isDirectory()) walk(f);
      else if (f.endsWith('.ts')) files.push(f);
    }
  };
  for (const d of ['apps', 'packages', 'scripts', 'test', 'examples'])
    if (fs.existsSync(path.join(root, d))) walk(path.join(root, d));
  for (const f of files) {
    const rel = path.relative(root, f);
    const source = ts.createSourceFile(f, fs.readFileSync(f, 'utf8'), ts.ScriptTarget.Latest);
    for (const st of source.statements) {
      if (!(ts.isImportDeclaration(st) || ts.isExportDeclaration(st))) continue;
      if (!st.moduleSpecifier || !ts.isStringLiteral(st.moduleSpecifier)) continue;
      const spec = st.moduleSpecifier.text;
      const bare = /^@mtg\/([a-z-]+)$/.exec(spec)?.[1];
      const relative = spec.startsWith('.')
        ? /^packages\/([a-z-]+)\/src\/index\.ts$/.exec(
            path.relative(root, path.resolve(path.dirname(f), spec)),
          )?.[1]
        : undefined;
      const pkg = bare ?? relative;
      // A package's own sources reach its modules directly, not through its face.
      if (!pkg || (rel.startsWith(`packages/${pkg}/src/`) && bare === undefined)) continue;
      const names = (used[`@mtg/${pkg}`] ??= new Set());
      if (ts.isImportDeclaration(st)) {
        const bindings = st.importClause?.namedBindings;
        if (bindings && ts.isNamedImports(bindings))
          for (const el of bindings.elements) names.add((el.propertyName ?? el.name).text);
        if (bindings && ts.isNamespaceImport(bindings)) names.add('*');
        if (st.importClause?.name) names.add('default');
      } else if (st.exportClause && ts.isNamedExports(st.exportClause)) {
        for (const el of st.exportClause.elements) names.add((el.propertyName ?? el.name).text);
      }
    }
  }
  return used;
}

/** Product sources (apps, packages, scripts; not tests or bench fixtures) whose text matches. */
export function sourcesMatching(pattern: RegExp): string[] {
  const found: string[] = [];
  const walk = (dir: string) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      if (e.name === 'node_modules' || e.name.startsWith('.') || e.name === 'test') continue;
      const f = path.join(dir, e.name);
      if (e.isDirectory()) walk(f);
      else if (f.endsWith('.ts') && pattern.test(fs.readFileSync(f, 'utf8')))
        found.push(path.relative(root, f));
    }
  };
  for (const d of ['apps', 'packages', 'scripts']) walk(path.join(root, d));
  return found.filter((f) => !f.startsWith('scripts/bench/')).sort();
}
