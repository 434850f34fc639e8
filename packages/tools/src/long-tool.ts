// The tool kit owns the shapes tool authors write against; the host packages use them as is.
export type {
  LongTool as LongToolDefinition,
  LongToolLimits,
  TaskContext,
  TaskOwner,
  TargetClient,
} from '@mtg/tool-kit';
