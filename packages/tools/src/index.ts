export type { ToolDefinition, ToolResult, ToolContext, ToolListing } from './tool-definition.ts';
export { toolListing } from './tool-definition.ts';
export { whoami } from './whoami.ts';
export { createCatalogue, type Catalogue } from './catalogue.ts';
export type {
  LongToolDefinition,
  LongToolLimits,
  TaskContext,
  TaskOwner,
  DownstreamClient,
} from './long-tool.ts';
export {
  demoTools,
  provisionTestEnvironment,
  generateReport,
  bulkUpdateRecords,
} from './demo/index.ts';
export { createDownstreamClient, DownstreamError } from './downstream-http-client.ts';
export { toolLimitsOverrides, type ToolLimitsOverrides } from './tool-limits-config.ts';
export {
  createDownstreamResilience,
  DownstreamUnavailable,
  DownstreamUnreachable,
  isDownstreamUnavailable,
  describeUnavailable,
  type DownstreamResilience,
  type DownstreamResilienceOptions,
  type CircuitStateName,
  type UnavailableCode,
} from './downstream-resilience.ts';
