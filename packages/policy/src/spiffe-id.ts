import type { X509Certificate } from 'node:crypto';

/** A parsed SPIFFE ID (SPIFFE-ID spec §2). */
export type SpiffeId = { trustDomain: string; segments: string[] };

const TRUST_DOMAIN = /^[a-z0-9._-]+$/;
const SEGMENT = /^[A-Za-z0-9._-]+$/;
const MAX_LENGTH = 2048;

/**
 * Parses `spiffe://trust-domain/path` strictly: lowercase scheme and trust domain, no
 * userinfo, port, query or fragment, no empty, `.` or `..` segments, no trailing slash.
 * Anything else is not a SPIFFE ID (undefined), never "close enough".
 */
export function parseSpiffeId(value: string): SpiffeId | undefined {
  if (value.length > MAX_LENGTH || !value.startsWith('spiffe://')) return undefined;
  const [trustDomain = '', ...segments] = value.slice('spiffe://'.length).split('/');
  if (!TRUST_DOMAIN.test(trustDomain)) return undefined;
  for (const s of segments) {
    if (!SEGMENT.test(s) || s === '.' || s === '..') return undefined;
  }
  return { trustDomain, segments };
}

export type SpiffeIdOfCertificate =
  { ok: true; id: string | undefined } | { ok: false; code: 'svid_invalid'; description: string };

/**
 * The SPIFFE ID an X.509 certificate carries (X509-SVID spec §2, §4): exactly one URI SAN,
 * a valid SPIFFE ID, on a leaf certificate. A certificate with no `spiffe:` URI SAN is a
 * plain client certificate (`id` undefined); one that tries to be an SVID and fails is
 * invalid. Chain verification is the caller's job (TLS, or the proxy and `isIssuedBy`).
 */
export function spiffeIdOfCertificate(cert: X509Certificate): SpiffeIdOfCertificate {
  // Node quotes a SAN value that contains a delimiter ("URI:\"a, b\""); such a value can
  // never be a valid SPIFFE ID, so splitting on ", " and refusing quoted values is safe.
  const uris = (cert.subjectAltName ?? '')
    .split(', ')
    .filter((entry) => entry.startsWith('URI:'))
    .map((entry) => entry.slice('URI:'.length));
  const spiffe = uris.filter((u) => u.replace(/^"/, '').toLowerCase().startsWith('spiffe:'));
  if (spiffe.length === 0) return { ok: true, id: undefined };
  if (uris.length !== 1) {
    return { ok: false, code: 'svid_invalid', description: 'an X509-SVID has exactly one URI SAN' };
  }
  const id = spiffe[0]!;
  if (!parseSpiffeId(id)) {
    return { ok: false, code: 'svid_invalid', description: `"${id}" is not a valid SPIFFE ID` };
  }
  if (cert.ca) {
    return {
      ok: false,
      code: 'svid_invalid',
      description: 'a CA certificate is not a workload identity',
    };
  }
  return { ok: true, id };
}
