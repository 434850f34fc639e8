export {
  startEmbeddedPostgres,
  EmbeddedPostgresError,
  DEFAULT_EMBEDDED_PORT,
  type EmbeddedPostgres,
  type EmbeddedPostgresOptions,
  type EmbeddedPostgresExit,
  type EmbeddedPostgresErrorCode,
  type EmbeddedPostgresLogger,
} from './embedded-postgres.ts';
