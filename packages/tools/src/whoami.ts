import { z } from 'zod';
import type { ToolDefinition } from './tool-definition.ts';

const output = z.object({
  subject: z.string(),
  tenant: z.string(),
  client: z.string(),
  scopes: z.array(z.string()),
  issuer: z.string(),
});

/** Returns the principal the gateway sees for the calling token. */
export const whoami: ToolDefinition<Record<string, never>> = {
  name: 'whoami',
  title: 'Who am I',
  description:
    'Returns the principal this gateway sees for your access token: subject, tenant, client and scopes.',
  inputSchema: z.object({}).strict(),
  outputSchema: output,
  async run({ principal }) {
    const seen = {
      subject: principal.subject,
      tenant: principal.tenant,
      client: principal.client,
      scopes: principal.scopes,
      issuer: principal.issuer,
    };
    return { content: [{ type: 'text', text: JSON.stringify(seen) }], structuredContent: seen };
  },
};
