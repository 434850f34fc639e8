export { createPool, type Pool, type PoolOptions } from './create-pool.ts';
export { migrate, type MigrateResult } from './migrate.ts';
export {
  migrationStatus,
  pendingMigrations,
  type MigrationStatusEntry,
} from './migration-status.ts';
export { MigrationChangedError } from './migration-changed-error.ts';
export type { MigrationFile } from './migration-files.ts';
export { withTransaction, type Queryable } from './with-transaction.ts';
export {
  databaseFailureOf,
  type DatabaseFailure,
  type DatabaseFailureCode,
} from './database-failure.ts';
export { prepared, runPrepared, queryMaybePrepared, type PreparedStatement } from './prepared.ts';
export { databaseUrlFor, recreateDatabase } from './admin.ts';
export { ROLES, type AppRole } from './roles.ts';
export {
  checkApplicationLogin,
  ApplicationLoginError,
  type ApplicationLoginErrorCode,
} from './check-application-login.ts';
export {
  provisionLoginRoles,
  dropLoginRoles,
  loginUrl,
  type LoginRole,
} from './provision-login-roles.ts';
export {
  checkSchemaVersion,
  SchemaNotMigratedError,
  MIGRATIONS_DIR,
} from './check-schema-version.ts';
export {
  createReadRouter,
  type ReadReason,
  type ReadRouter,
  type ReadRouterOptions,
  type ReadTarget,
} from './read-router.ts';
export { createReadPreferringPool } from './read-preferring-pool.ts';
export {
  countInTurn,
  countInTurnWithin,
  createWindowCounter,
  WINDOW_COUNT_CTE,
  type TurnRefusal,
  type CountChain,
  type WindowCount,
  type WindowCounter,
  type WindowCounterOptions,
} from './window-counter.ts';
