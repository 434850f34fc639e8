export { createConsole, type ConsoleOptions } from './create-console.ts';
export { consoleConfigSchema, type ConsoleConfig } from './config.ts';
export { CONTENT_SECURITY_POLICY } from './http/security-headers.ts';
export { roleOf, type ConsoleRole } from './auth/roles.ts';
