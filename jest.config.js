// ESM jest: several dependencies (pg-boss 12, openid-client 6, the MCP ext-tasks client) ship
// ESM only, so tests run under --experimental-vm-modules with swc stripping types.
export default {
  testEnvironment: 'node',
  extensionsToTreatAsEsm: ['.ts'],
  transform: {
    '^.+\\.ts$': [
      '@swc/jest',
      { jsc: { parser: { syntax: 'typescript' }, target: 'es2023' }, module: { type: 'es6' } },
    ],
  },
  testMatch: [
    '<rootDir>/{apps,packages,examples}/*/test/**/*.test.ts',
    '<rootDir>/test/**/*.test.ts',
  ],
  // What `npm run pack` stages and builds holds copies of every package.
  modulePathIgnorePatterns: ['<rootDir>/.pack/', '<rootDir>/.build/'],
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  testTimeout: 60000,
};
