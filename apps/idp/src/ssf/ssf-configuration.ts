/** Transmitter metadata (OpenID Shared Signals Framework 1.0 §7.1), minimal. */
export function ssfConfiguration(issuer: string, jwksUri: string) {
  return {
    spec_version: '1_0',
    issuer,
    jwks_uri: jwksUri,
    // Push (RFC 8935) to the one receiver configured with SSF_PUSH_URL; no stream management
    // endpoints: streams are configuration, not API, in the dev stack.
    delivery_methods_supported: ['urn:ietf:rfc:8935'],
  };
}
