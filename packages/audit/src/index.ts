export { appendAudit, type AuditEvent, type AuditEventType } from './append-audit.ts';
export { canonicalJson } from './canonical-json.ts';
