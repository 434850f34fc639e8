import { createHash, X509Certificate } from 'node:crypto';
import net from 'node:net';
import { TLSSocket } from 'node:tls';
import type { NextFunction, Request, Response } from 'express';
import { ConfigError } from '@mtg/config';
import type { Principal } from '@mtg/identity';
import type { Logger } from '@mtg/log';
import { spiffeIdOfCertificate, type Workload } from '@mtg/policy';
import { refuseToken } from './authenticate.ts';
import { requestContextOf, setRequestContext } from './request-context.ts';

/** Why a request's workload identity was refused (audited as `auth.denied` reasons). */
export type WorkloadDenyCode =
  /** A client certificate that does not chain to GATEWAY_TLS_CLIENT_CA (or is expired). */
  | 'client_cert_untrusted'
  /** A certificate that cannot be read, or claims a SPIFFE ID but is no valid X509-SVID. */
  | 'client_cert_invalid'
  /** From a trusted proxy: the header repeated, or one value holding several certificates. */
  | 'client_cert_ambiguous'
  /** RFC 8705 §3: the token is bound to a certificate, and not to the one presented. */
  | 'token_cert_mismatch';

export type WorkloadResult =
  | { ok: true; workload: Workload; forwardedIgnored: boolean }
  | { ok: false; code: WorkloadDenyCode; description: string };

/** What a request shows about its caller, taken off the socket and headers. */
export interface WorkloadEvidence {
  principal: Principal;
  /** The verified access token's claims (for RFC 8705 `cnf`). */
  claims: Record<string, unknown>;
  /** The TCP peer (a proxy when there is one). */
  peerAddress: string | undefined;
  /** The certificate of our own TLS connection, when the client presented one. */
  tlsPeer?: { cert: X509Certificate; authorized: boolean; error?: string };
  /** The forwarded-certificate header, each occurrence as received. */
  forwarded?: readonly string[];
}

export interface WorkloadIdentityOptions {
  /** Peers whose forwarded-certificate header is believed (exact IP addresses). */
  trustedProxies: readonly string[];
  /** Client CAs; when non-empty, forwarded certificates must be issued by one of them too. */
  clientCas: readonly X509Certificate[];
  now?: () => Date;
}

/**
 * Decides the caller's workload (docs/identity.md, "Workload identity and per-tool policy"):
 * - from a trusted proxy, the certificate in the forwarded header, and only that (the
 *   proxy's own TLS certificate identifies the proxy, not the caller);
 * - else the client certificate of our own TLS connection, which must have verified;
 * - a forwarded header from any other peer is ignored (`forwardedIgnored`);
 * - a certificate with a SPIFFE ID makes a `spiffe` workload that still names the token's
 *   OAuth client; without one, the workload is the OAuth client (the principal's client).
 * A token bound to a certificate (RFC 8705 `cnf.x5t#S256`) needs exactly that certificate.
 */
export function identifyWorkload(
  evidence: WorkloadEvidence,
  options: WorkloadIdentityOptions,
): WorkloadResult {
  const fromProxy =
    evidence.peerAddress !== undefined && options.trustedProxies.includes(evidence.peerAddress);
  let cert: X509Certificate | undefined;
  let via: 'tls' | 'forwarded' = 'tls';
  if (fromProxy) {
    if (evidence.forwarded !== undefined) {
      // Which of several would be the caller's is a guess (a proxy that appends instead of
      // replacing, or a client's header passed through): none is believed.
      if (evidence.forwarded.length !== 1 || countPemCertificates(evidence.forwarded[0]!) > 1)
        return {
          ok: false,
          code: 'client_cert_ambiguous',
          description: 'the proxy forwarded more than one client certificate',
        };
      const read = readForwardedCertificate(evidence.forwarded[0]!);
      if (!read)
        return {
          ok: false,
          code: 'client_cert_invalid',
          description: 'the forwarded client certificate cannot be read',
        };
      if (
        options.clientCas.length > 0 &&
        !isIssuedByOneOf(read, options.clientCas, options.now?.() ?? new Date())
      ) {
        return {
          ok: false,
          code: 'client_cert_untrusted',
          description:
            'the forwarded client certificate is not issued by a trusted CA or not valid now',
        };
      }
      cert = read;
      via = 'forwarded';
    }
  } else if (evidence.tlsPeer) {
    if (!evidence.tlsPeer.authorized) {
      return {
        ok: false,
        code: 'client_cert_untrusted',
        description: `the client certificate does not verify${evidence.tlsPeer.error ? ` (${evidence.tlsPeer.error})` : ''}`,
      };
    }
    cert = evidence.tlsPeer.cert;
  }

  const cnf = evidence.claims.cnf as { 'x5t#S256'?: unknown } | undefined;
  const bound = cnf?.['x5t#S256'];
  if (bound !== undefined && (!cert || bound !== thumbprint(cert))) {
    return {
      ok: false,
      code: 'token_cert_mismatch',
      description: 'the token is bound to a client certificate that was not presented',
    };
  }

  const forwardedIgnored = !fromProxy && evidence.forwarded !== undefined;
  const client = evidence.principal.client;
  if (!cert) return { ok: true, workload: { kind: 'oauth-client', id: client }, forwardedIgnored };
  const svid = spiffeIdOfCertificate(cert);
  if (!svid.ok) return { ok: false, code: 'client_cert_invalid', description: svid.description };
  if (!svid.id)
    return { ok: true, workload: { kind: 'oauth-client', id: client }, forwardedIgnored };
  return { ok: true, workload: { kind: 'spiffe', id: svid.id, client, via }, forwardedIgnored };
}

/**
 * Express adapter: completes the request's context with the workload (request-context.ts),
 * where the MCP endpoint, dispatch and the task verbs read it. Runs after
 * authenticate. Refusals are 403 (certificate) or 401 (certificate-bound token), answered
 * here and reported through `onDenied` before the answer goes out.
 */
export function workloadIdentity(
  options: WorkloadIdentityOptions & {
    forwardedCertHeader: string;
    resourceMetadataUrl: string;
    logger: Logger;
    onDenied?: (res: Response, code: WorkloadDenyCode) => Promise<unknown>;
  },
) {
  const trustedProxies = options.trustedProxies.map((p) => {
    if (net.isIP(p) === 0) {
      throw new ConfigError([
        { variable: 'TRUSTED_PROXIES', message: `"${p}" is not an IP address` },
      ]);
    }
    return normalizeAddress(p)!;
  });
  const header = options.forwardedCertHeader.toLowerCase();

  return async (req: Request, res: Response, next: NextFunction) => {
    const request = requestContextOf(res);
    // headersDistinct: node joins a repeated header with ", ", which would hide the repeat.
    const forwarded = req.headersDistinct[header];
    const socket = req.socket;
    const peerCert = socket instanceof TLSSocket ? socket.getPeerX509Certificate() : undefined;
    const result = identifyWorkload(
      {
        principal: request.principal,
        // Verified (and decoded) by authenticate in this request; read here only for `cnf`.
        claims: request.claims,
        peerAddress: normalizeAddress(socket.remoteAddress),
        ...(peerCert && socket instanceof TLSSocket
          ? {
              tlsPeer: {
                cert: peerCert,
                authorized: socket.authorized,
                ...(socket.authorizationError ? { error: String(socket.authorizationError) } : {}),
              },
            }
          : {}),
        ...(forwarded !== undefined ? { forwarded } : {}),
      },
      {
        trustedProxies,
        clientCas: options.clientCas,
        ...(options.now ? { now: options.now } : {}),
      },
    );
    if (!result.ok) {
      await options.onDenied?.(res, result.code);
      options.logger.info('workload identity refused', {
        correlationId: res.locals.correlationId as string | undefined,
        code: result.code,
      });
      if (result.code === 'token_cert_mismatch') {
        refuseToken(res, options.resourceMetadataUrl, result.description);
      } else {
        res
          .status(403)
          .json({ error: 'invalid_client_certificate', error_description: result.description });
      }
      return;
    }
    if (result.forwardedIgnored) {
      options.logger.warn('forwarded client certificate from an untrusted peer ignored', {
        correlationId: res.locals.correlationId as string | undefined,
        peer: socket.remoteAddress,
      });
    }
    setRequestContext(res, { ...request, workload: result.workload });
    next();
  };
}

/** RFC 8705 §3.1: base64url SHA-256 of the DER certificate. */
function thumbprint(cert: X509Certificate): string {
  return createHash('sha256').update(cert.raw).digest('base64url');
}

/** How many PEM certificates a URL-encoded header value holds (0 when it cannot be decoded). */
function countPemCertificates(value: string): number {
  try {
    return decodeURIComponent(value).split('-----BEGIN CERTIFICATE-----').length - 1;
  } catch {
    return 0;
  }
}

/** A URL-encoded PEM certificate (nginx `$ssl_client_escaped_cert`, AWS ALB, HAProxy). */
function readForwardedCertificate(value: string): X509Certificate | undefined {
  try {
    const pem = decodeURIComponent(value);
    if (!pem.includes('-----BEGIN CERTIFICATE-----')) return undefined;
    return new X509Certificate(pem);
  } catch {
    return undefined;
  }
}

function isIssuedByOneOf(
  cert: X509Certificate,
  cas: readonly X509Certificate[],
  now: Date,
): boolean {
  if (now < cert.validFromDate || now > cert.validToDate) return false;
  return cas.some((ca) => cert.checkIssued(ca) && cert.verify(ca.publicKey));
}

/** `::ffff:10.0.0.1` → `10.0.0.1`, so IPv4 proxies match however the socket reports them. */
function normalizeAddress(address: string | undefined): string | undefined {
  return address?.startsWith('::ffff:') && net.isIPv4(address.slice(7))
    ? address.slice(7)
    : address;
}
