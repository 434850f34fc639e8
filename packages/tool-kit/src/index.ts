export { defineTool, type ToolSpec } from './define-tool.ts';
export { defineLongTool, DEFAULT_LIMITS, type LongToolSpec } from './define-long-tool.ts';
export { definePack, isPack, type Pack, type PackSpec } from './define-pack.ts';
export { ToolError, isToolError, TOOL_ERROR_CODE } from './tool-error.ts';
export { TOOL_NAME } from './tool-names.ts';
export { TASK_STATUSES, isTaskStatus, type TaskStatus } from './task-status.ts';
export type {
  AnyTool,
  ApprovalGranted,
  ApprovalRequest,
  AskAnswer,
  AskQuestion,
  InstantTool,
  InstantToolContext,
  Json,
  LongTool,
  LongToolLimits,
  StepOutput,
  TargetClient,
  TaskContext,
  TaskOwner,
  ToolCaller,
  ToolLogger,
  ToolOrigin,
  ToolResult,
  UpstreamQuestion,
  UpstreamTaskClient,
  UpstreamTaskRef,
  UpstreamTaskState,
  UpstreamTaskStatus,
  UpstreamTaskWire,
  WriteOptions,
} from './tool-types.ts';
