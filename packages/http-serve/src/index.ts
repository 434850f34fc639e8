export {
  DEFAULT_DRAIN_MS,
  serveUntilSignalled,
  type ServeOptions,
} from './serve-until-signalled.ts';
