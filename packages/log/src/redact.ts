// Keys whose values never reach a log line, whatever the caller passes.
const SECRET_KEYS =
  /^(authorization|access_token|refresh_token|id_token|subject_token|actor_token|token|client_secret|password|secret|cookie|set-cookie|credential|delegation)$/i;
// A JWT anywhere in a string value (three base64url segments, the first starting "eyJ").
const JWT = /eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*/g;

/** Returns a copy of `value` with secret-looking keys and embedded JWTs replaced. */
export function redact(value: unknown, depth = 0): unknown {
  if (depth > 8) return '[depth]';
  if (typeof value === 'string') return value.replace(JWT, '[jwt]');
  if (Array.isArray(value)) return value.map((v) => redact(v, depth + 1));
  if (value instanceof Error) return { name: value.name, message: redact(value.message) };
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      out[k] = SECRET_KEYS.test(k) ? '[redacted]' : redact(v, depth + 1);
    }
    return out;
  }
  return value;
}
