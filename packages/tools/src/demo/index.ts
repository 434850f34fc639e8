import type { LongToolDefinition } from '../long-tool.ts';
import type { ToolLimitsOverrides } from '../tool-limits-config.ts';
import { bulkUpdateRecords } from './bulk-update-records.ts';
import { generateReport } from './generate-report.ts';
import { provisionTestEnvironment } from './provision-test-environment.ts';

export { bulkUpdateRecords, generateReport, provisionTestEnvironment };

/** The demo long tools, by name, with per-tool limit overrides (TOOL_LIMITS). */
export function demoTools(overrides: ToolLimitsOverrides = {}): Map<string, LongToolDefinition> {
  for (const name of Object.keys(overrides)) {
    if (
      ![provisionTestEnvironment, generateReport, bulkUpdateRecords].some((t) => t.name === name)
    ) {
      throw new Error(`TOOL_LIMITS names an unknown tool: ${name}`);
    }
  }
  return new Map<string, LongToolDefinition>(
    [provisionTestEnvironment, generateReport, bulkUpdateRecords].map((t) => [
      t.name,
      { ...t, limits: { ...t.limits, ...overrides[t.name] } },
    ]),
  );
}
