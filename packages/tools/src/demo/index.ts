import type { LongToolDefinition } from '../long-tool.ts';
import { bulkUpdateRecords } from './bulk-update-records.ts';
import { generateReport } from './generate-report.ts';
import { provisionTestEnvironment } from './provision-test-environment.ts';

export { bulkUpdateRecords, generateReport, provisionTestEnvironment };

/** The demo long tools, by name. */
export function demoTools(): Map<string, LongToolDefinition> {
  return new Map<string, LongToolDefinition>(
    [provisionTestEnvironment, generateReport, bulkUpdateRecords].map((t) => [t.name, t]),
  );
}
