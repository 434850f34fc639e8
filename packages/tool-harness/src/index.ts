export {
  createToolHarness,
  type HarnessOptions,
  type HarnessRunResult,
  type HarnessTaskState,
  type HttpTarget,
  type ToolHarness,
} from './create-tool-harness.ts';
export { recordingTarget, type RecordedCall, type RecordingTarget } from './recording-target.ts';
