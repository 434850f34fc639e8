// The bench and the tests wait with the CLI's pollUntil (one implementation).
export * from '../../apps/cli/src/lib/poll-until.ts';
