import type { LongToolLimits } from '../long-tool.ts';

const MINUTE = 60_000;

/** Defaults shared by the demo tools; each tool documents where it differs. */
export const DEMO_LIMITS: LongToolLimits = {
  defaultDeadlineMs: 30 * MINUTE,
  maxDeadlineMs: 2 * 60 * MINUTE,
  retentionMs: 24 * 60 * MINUTE,
  deleteResultOnRead: false,
  maxResultBytes: 256 * 1024,
};
