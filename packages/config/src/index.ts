export { parseConfig, ConfigError } from './parse-config.ts';
export { port, url, postgresUrl, csv, json, jsonRecord } from './fields.ts';
