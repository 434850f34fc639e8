// The layering the code keeps, checked by `npm run lint:layers` and by
// test/structure/layering.test.ts (so `npm test` fails on a violation). Apps sit on packages;
// packages never reach up into apps or scripts; the launcher (apps/cli) starts the other apps
// by package name at run time (import.meta.resolve), which a static cruise does not see and is
// allowed. Tests use a workspace's entry point (`@mtg/x`) rather than a relative path into its
// src/; a test may import its own workspace's src/ relatively, and the repository-wide suite
// (test/**) may reach an app's internal modules, which no entry point exposes, white-box.
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'app-imports-another-app',
      comment:
        'An app imports another app only through the launcher resolving it by package name at run time, never statically.',
      severity: 'error',
      from: { path: '^apps/([^/]+)/' },
      to: { path: '^apps/([^/]+)/', pathNot: '^apps/$1/' },
    },
    {
      name: 'package-imports-app-or-scripts',
      comment: 'Packages are the lower layer: they never import an app or scripts/.',
      severity: 'error',
      from: { path: '^packages/' },
      to: { path: '^(apps|scripts)/' },
    },
    {
      name: 'package-cycle',
      comment: 'Packages form a DAG: no cycle between two or more packages.',
      severity: 'error',
      from: { path: '^packages/([^/]+)/' },
      to: {
        // A cycle that leaves the package: some step of it is in another package.
        circular: true,
        via: { pathNot: '^packages/$1/' },
      },
    },
    {
      name: 'workspace-test-imports-other-src',
      comment:
        "A workspace's tests import their own src/ relatively and every other workspace by its package name (@mtg/x).",
      severity: 'error',
      from: { path: '^(apps|packages|examples)/([^/]+)/(test/|.*[.]test[.]ts$)' },
      to: {
        path: '^(apps|packages|examples)/[^/]+/src/',
        pathNot: '^$1/$2/',
        dependencyTypes: ['local'],
        dependencyTypesNot: ['aliased'],
      },
    },
    {
      name: 'suite-imports-package-src',
      comment:
        "The repository's suite (test/**) imports a package by its name (@mtg/x), not a relative path into its src/; it may reach an app's internal modules, but an app's entry point by name.",
      severity: 'error',
      from: { path: '^test/' },
      to: {
        path: '^(packages/[^/]+/src/|apps/[^/]+/src/index[.]ts$)',
        dependencyTypes: ['local'],
        dependencyTypesNot: ['aliased'],
      },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '(^|/)(node_modules|\\.pack|\\.build|\\.data|dist)/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    // Workspaces are symlinked under node_modules; resolving the link shows `@mtg/x` as the
    // package's own file, so a relative path and a package-name import are told apart by the
    // dependency type (local vs npm), not by the target path.
    preserveSymlinks: false,
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
      extensions: ['.ts', '.js', '.mjs', '.cjs', '.json'],
    },
    reporterOptions: { text: { highlightFocused: true } },
  },
};
