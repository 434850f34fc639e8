import { TASK_STATUSES } from '@mtg/tool-kit';
import { z } from 'zod';

const text = (max: number) =>
  z
    .string()
    .max(max)
    // eslint-disable-next-line no-control-regex -- control characters are what it refuses
    .refine((s) => !/[\u0000-\u001f]/.test(s), 'must not contain control characters')
    .transform((s) => s.trim() || undefined);

/** A time as typed in a form (`2026-12-01T09:30`, taken as UTC) or ISO 8601. */
export const instant = z
  .string()
  .transform((s, ctx) => {
    if (!s.trim()) return undefined;
    const m = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?)?(Z|[+-]\d{2}:\d{2})?$/.exec(
      s.trim(),
    );
    const at = m ? Date.parse(m[4] ? s.trim() : `${s.trim()}${m[1] ? '' : 'T00:00'}Z`) : NaN;
    if (Number.isNaN(at)) {
      ctx.addIssue({ code: 'custom', message: 'must be a date and time, e.g. 2026-12-01T09:30' });
      return z.NEVER;
    }
    return new Date(at).toISOString();
  })
  .optional();

export const TaskSearchQuery = z.object({
  id: text(128).optional(),
  user: text(256).optional(),
  client: text(256).optional(),
  tool: text(256).optional(),
  status: z
    .enum(['', ...TASK_STATUSES])
    .transform((s) => s || undefined)
    .optional(),
  from: instant,
  to: instant,
  format: z.string().optional(),
});

/** `24h`, `7d`, `30d`: how far back a period starts. */
export const since = z
  .string()
  .regex(/^[1-9]\d{0,3}[hd]$/, 'must be like 24h or 7d')
  .default('7d')
  .transform((s) => ({
    text: s,
    ms: Number(s.slice(0, -1)) * (s.endsWith('h') ? 3_600_000 : 86_400_000),
  }));

export const DenialsQuery = z.object({ since, format: z.string().optional() });

export const PrincipalQuery = z.object({
  sub: text(256).optional(),
  format: z.string().optional(),
});

export const EvidenceQuery = z.object({
  month: z
    .string()
    .regex(/^\d{4}-(0[1-9]|1[0-2])$/, 'must be YYYY-MM')
    .optional()
    .or(z.literal('').transform(() => undefined)),
  from: instant,
  to: instant,
  download: z.string().optional(),
});

export function describeIssues(error: z.ZodError): string {
  return error.issues.map((i) => `${i.path.join('.') || 'query'}: ${i.message}`).join('; ');
}
