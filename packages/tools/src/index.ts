export type { ToolDefinition, ToolResult, ToolContext, ToolListing } from './tool-definition.ts';
export { toolListing, jsonSchemaOf } from './tool-definition.ts';
export { whoami } from './whoami.ts';
export { serveInstantTool, toolErrorResult, TOOL_ERROR_META } from './instant-tool.ts';
export { createCatalogue, type Catalogue } from './catalogue.ts';
export type {
  LongToolDefinition,
  LongToolLimits,
  TaskContext,
  TaskOwner,
  TargetClient,
} from './long-tool.ts';
export {
  createRegistry,
  queueName,
  type LoadedPack,
  type RegisteredTool,
  type ToolRegistry,
} from './registry/create-registry.ts';
export {
  loadToolRegistry,
  toolPacksFromEnv,
  DEFAULT_TOOL_PACKS,
  type LoadOptions,
} from './registry/load-packs.ts';
export { RegistryError, type RegistryErrorCode } from './registry/registry-error.ts';
export {
  createTargetClient,
  DownstreamError,
  TargetPathError,
  type TargetClientOptions,
} from './targets/target-client.ts';
export {
  loadTargets,
  TargetConfigError,
  type TargetConfig,
  type TargetSettings,
} from './targets/target-config.ts';
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
