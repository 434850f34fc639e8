export { parseConfig, ConfigError } from './parse-config.ts';
export { port, url, csv, jsonRecord } from './fields.ts';
