import { X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import tls from 'node:tls';
import { ConfigError } from '@mtg/config';
import type { GatewayConfig } from './config.ts';

/** The gateway's TLS settings, read from the files the config names. */
export interface GatewayTls {
  /** Options for node:https; undefined when the gateway serves plain HTTP (behind a proxy). */
  server?: https.ServerOptions;
  /** Client-certificate CAs: the TLS listener's trust anchors, and what forwarded certificates must chain to. */
  clientCas: X509Certificate[];
}

type TlsConfig = Pick<
  GatewayConfig,
  'GATEWAY_TLS_CERT' | 'GATEWAY_TLS_KEY' | 'GATEWAY_TLS_CLIENT_CA' | 'resource'
>;

const problem = (variable: string, message: string) => new ConfigError([{ variable, message }]);

/**
 * Reads the certificate, key and client CA files. With a client CA the listener asks for
 * client certificates but does not reject the handshake on a bad one (`rejectUnauthorized:
 * false`): the gateway answers the request itself, with a body that says what is wrong,
 * and audits it. Throws ConfigError naming the variable at fault.
 */
export async function loadTls(config: TlsConfig): Promise<GatewayTls> {
  const {
    GATEWAY_TLS_CERT: certFile,
    GATEWAY_TLS_KEY: keyFile,
    GATEWAY_TLS_CLIENT_CA: caFile,
  } = config;
  if (!certFile !== !keyFile) {
    throw problem(
      certFile ? 'GATEWAY_TLS_KEY' : 'GATEWAY_TLS_CERT',
      'GATEWAY_TLS_CERT and GATEWAY_TLS_KEY are set together',
    );
  }
  const clientCaPem = caFile ? await readPem('GATEWAY_TLS_CLIENT_CA', caFile) : undefined;
  let clientCas: X509Certificate[];
  try {
    clientCas = clientCaPem ? pemCertificates(clientCaPem) : [];
  } catch (error) {
    throw problem('GATEWAY_TLS_CLIENT_CA', `${caFile}: ${(error as Error).message}`);
  }
  if (clientCaPem && clientCas.length === 0) {
    throw problem('GATEWAY_TLS_CLIENT_CA', `${caFile} holds no PEM certificate`);
  }
  if (clientCas.some((c) => !c.ca)) {
    throw problem('GATEWAY_TLS_CLIENT_CA', `${caFile} holds a certificate that is not a CA`);
  }
  if (!certFile || !keyFile) return { clientCas };

  // Tokens carry the canonical URL as audience and clients derive it from where they connect:
  // an https listener with an http resource would fail every token check, or be a typo.
  if (new URL(config.resource).protocol !== 'https:') {
    throw problem(
      'GATEWAY_RESOURCE',
      `must be the https URL of the MCP endpoint when GATEWAY_TLS_CERT is set (is ${config.resource})`,
    );
  }
  const cert = await readPem('GATEWAY_TLS_CERT', certFile);
  const key = await readPem('GATEWAY_TLS_KEY', keyFile);
  try {
    tls.createSecureContext({ cert, key });
  } catch (error) {
    throw problem(
      'GATEWAY_TLS_KEY',
      `does not go with GATEWAY_TLS_CERT (${(error as Error).message})`,
    );
  }
  return {
    clientCas,
    server: {
      cert,
      key,
      minVersion: 'TLSv1.2',
      ...(clientCaPem ? { ca: clientCaPem, requestCert: true, rejectUnauthorized: false } : {}),
    },
  };
}

/** An HTTPS server when TLS options are given, else plain HTTP. */
export function createGatewayServer(
  app: http.RequestListener,
  tlsOptions: https.ServerOptions | undefined,
): http.Server {
  return tlsOptions ? https.createServer(tlsOptions, app) : http.createServer(app);
}

/** Every certificate in a PEM bundle. */
export function pemCertificates(pem: string): X509Certificate[] {
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  return blocks.map((b) => new X509Certificate(b));
}

async function readPem(variable: string, file: string): Promise<string> {
  try {
    return await readFile(file, 'utf8');
  } catch (error) {
    throw problem(
      variable,
      `cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`,
    );
  }
}
