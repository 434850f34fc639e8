export {
  createUpstreamDemo,
  type RecordedCall,
  type UpstreamDemoOptions,
} from './create-upstream-demo.ts';
