// `npm run lint` (after prettier): typescript-eslint's type-aware rules over everything
// tsconfig.json type-checks, so a promise nobody awaits, a promise handed where a callback's
// result is ignored, or an `any` leaking into typed code fails CI rather than a production run.
import js from '@eslint/js';
import { defineConfig } from 'eslint/config';
import tseslint from 'typescript-eslint';

export default defineConfig(
  {
    ignores: [
      '**/node_modules/',
      '.build/',
      '.pack/',
      '.data/',
      'coverage/',
      'evidence/',
      // The `mtg init` scaffold: its imports resolve inside a generated pack, not here, and
      // tsconfig.json does not type-check it (the pack's own test run does).
      'apps/cli/templates/',
    ],
  },
  {
    files: ['**/*.ts'],
    extends: [js.configs.recommended, ...tseslint.configs.recommendedTypeChecked],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      // Named in issue 25: kept at error whatever the preset does.
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/no-unsafe-argument': 'error',
      '@typescript-eslint/no-unsafe-assignment': 'error',
      '@typescript-eslint/no-unsafe-call': 'error',
      '@typescript-eslint/no-unsafe-member-access': 'error',
      '@typescript-eslint/no-unsafe-return': 'error',
      // Off: an `async` function without `await` is how this code implements a
      // Promise-returning interface (a storage adapter, a request handler, a step); dropping
      // `async` would turn its throws into synchronous ones, a change of behaviour for style.
      '@typescript-eslint/require-await': 'off',
      // Passing on an abort reason or a caught error unchanged is what the platform does
      // (fetch rejects with signal.reason); a literal non-Error is still refused.
      '@typescript-eslint/prefer-promise-reject-errors': [
        'error',
        { allowThrowingAny: true, allowThrowingUnknown: true },
      ],
      // `_` marks a parameter an interface requires but this implementation does not use.
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_' },
      ],
    },
  },
  {
    // Tests read wire data (JSON bodies, JSON-RPC answers, SQL rows, parsed manifests) as
    // `any` and assert its shape with expect(): the assertion is the type check, and a typed
    // copy of each answer would restate what the test asserts. The sources keep these rules.
    // The evidence checks and the benchmarks drive a running stack the same way and read its
    // answers the same way.
    files: [
      '**/test/**/*.ts',
      'test/**/*.ts',
      'apps/cli/src/evidence/**/*.ts',
      'scripts/bench/**/*.ts',
    ],
    rules: {
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      // ...and render those values into messages and reports as they come.
      '@typescript-eslint/no-base-to-string': 'off',
      '@typescript-eslint/restrict-template-expressions': 'off',
    },
  },
  {
    // Plain JavaScript: the console's browser script and the tools' own configs. No type
    // information (tsconfig.json does not include them), so the recommended set only.
    files: ['**/*.js', '**/*.cjs'],
    extends: [js.configs.recommended],
  },
  {
    files: ['apps/console/src/static/**/*.js'],
    languageOptions: {
      sourceType: 'script',
      globals: { document: 'readonly', window: 'readonly', Chart: 'readonly' },
    },
  },
  {
    files: ['**/*.cjs'],
    languageOptions: {
      sourceType: 'commonjs',
      globals: { module: 'writable', require: 'readonly', __dirname: 'readonly' },
    },
  },
);
