export {
  createUpstreamDemo,
  type RecordedCall,
  type RecordedSession,
  type UpstreamDemoOptions,
} from './create-upstream-demo.ts';
