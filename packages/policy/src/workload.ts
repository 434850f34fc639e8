/**
 * Glossary
 * - workload: the software calling the gateway, as opposed to the user it acts for. Either
 *   the OAuth client its access token was issued to, or a SPIFFE ID proven with a client
 *   certificate (an X.509-SVID) on the TLS connection or forwarded by a trusted proxy.
 * - SPIFFE ID: `spiffe://<trust domain>/<path>`, the URI SAN of an X.509-SVID.
 * - policy entry: one `workloads[]` item of the policy file: which tools a workload may call.
 * - binding: which OAuth clients a SPIFFE workload may present tokens from (`clients`).
 */

/**
 * Who is calling, as far as per-tool policy is concerned. A SPIFFE workload always comes
 * with a token too, so it also names the token's OAuth client.
 */
export type Workload =
  | { kind: 'oauth-client'; id: string }
  | {
      kind: 'spiffe';
      id: string;
      /** The OAuth client of the access token presented with the certificate. */
      client: string;
      /** Whether the certificate came on our own TLS connection or from a trusted proxy. */
      via: 'tls' | 'forwarded';
    };
