/**
 * The chaos suite kills and restarts real processes for minutes: it runs under `npm run
 * chaos` (or `npm test -- test/chaos`, or CHAOS=1), not as part of a plain `npm test`, whose
 * testMatch also covers this directory. jest runs in band, so this process's argv is jest's.
 */
export const chaosEnabled =
  process.env.CHAOS === '1' || process.argv.some((a) => a.includes('test/chaos'));

export const chaosDescribe: jest.Describe = chaosEnabled ? describe : describe.skip;
