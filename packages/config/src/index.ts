export { parseConfig, ConfigError } from './parse-config.ts';
export { port, url, csv, json, jsonRecord, bool } from './fields.ts';
