export {
  dataDir,
  DATABASE_SERVICES,
  DEV_CLIENTS,
  generateDatabasePasswords,
  generateDevSecrets,
  loadOrCreateDevSecrets,
  type DatabasePasswords,
  type DatabaseService,
  type DevClient,
  type DevSecrets,
} from './dev-secrets.ts';
export { DEV_USER_GRANT } from './dev-user-grant.ts';
