import { definePack } from '@mtg/tool-kit';
import { z } from 'zod';
import { bulkUpdateRecords } from './bulk-update-records.ts';
import { generateReport } from './generate-report.ts';
import { provisionTestEnvironment } from './provision-test-environment.ts';

/** The demo pack's own configuration. */
export const demoConfig = z.object({
  /** Duration of each demo step and batch, so tests and benchmarks can run them fast. */
  DEMO_STEP_MS: z.coerce.number().int().min(0).default(1500),
  /**
   * bulk_update_records changing more records than this waits for a second person's approval
   * (scope records:approve) before its first batch.
   */
  DEMO_APPROVAL_ABOVE: z.coerce.number().int().min(0).default(50_000),
});
export type DemoConfig = z.infer<typeof demoConfig>;

/** The demo tools against apps/downstream (the `downstream` target). */
export default definePack({
  name: '@mtg/demo-tools',
  version: '0.1.0',
  config: demoConfig,
  targets: ['downstream'],
  tools: (config) => [
    provisionTestEnvironment(config),
    generateReport(config),
    bulkUpdateRecords(config),
  ],
});
