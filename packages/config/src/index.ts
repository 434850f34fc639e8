export { parseConfig, ConfigError } from './parse-config.ts';
export { port, url, csv, jsonRecord, bool } from './fields.ts';
