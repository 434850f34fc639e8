import type { CheckResult } from './checks.ts';

export function renderMarkdown(report: {
  generatedAt: string;
  endpoints: Record<string, string>;
  checks: CheckResult[];
  auditVerification: { exitCode: number; output: string };
}): string {
  const lines = [
    '# Security review evidence pack',
    '',
    `Generated ${report.generatedAt} against ${report.endpoints.mcp}.`,
    '',
    '| check | result | summary |',
    '|---|---|---|',
    ...report.checks.map((c) => `| ${c.title} | ${c.passed ? 'PASS' : '**FAIL**'} | ${c.summary.replace(/\|/g, '\\|')} |`),
    `| Audit chain verification (\`npm run -s audit:verify\`) | ${report.auditVerification.exitCode === 0 ? 'PASS' : '**FAIL**'} | ${report.auditVerification.output.split('\n')[0]?.replace(/\|/g, '\\|')} |`,
    '',
  ];
  for (const c of report.checks) {
    lines.push(`## ${c.title}`, '', `**${c.passed ? 'PASS' : 'FAIL'}** — ${c.summary}`, '');
    if (Object.keys(c.details).length) lines.push('```json', JSON.stringify(c.details, null, 2), '```', '');
    if (c.audit.length) {
      lines.push('Audit excerpt:', '', '| seq | at | type | tenant | subject | client | reason |', '|---|---|---|---|---|---|---|');
      for (const e of c.audit) {
        const at = e.occurred_at instanceof Date ? e.occurred_at.toISOString() : String(e.occurred_at);
        lines.push(`| ${e.seq} | ${at} | ${e.type} | ${e.tenant ?? ''} | ${e.subject ?? ''} | ${e.client ?? ''} | ${e.reason ?? ''} |`);
      }
      lines.push('');
    }
  }
  lines.push('## Audit chain verification', '', '```', report.auditVerification.output, '```', '');
  return lines.join('\n');
}
