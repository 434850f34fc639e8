import type { CheckResult } from './checks.ts';
import type { RunCoverage } from './run-scope.ts';

export function renderMarkdown(report: {
  generatedAt: string;
  endpoints: Record<string, string>;
  coverage?: RunCoverage | undefined;
  checks: CheckResult[];
  auditVerification: { exitCode: number; output: string };
}): string {
  const lines = [
    '# Security review evidence pack',
    '',
    `Generated ${report.generatedAt} against ${report.endpoints.mcp}.`,
    '',
    ...coverageLines(report.coverage),
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

/** What the report covers: its period, its chain range, and that its traffic is synthetic. */
function coverageLines(c: RunCoverage | undefined): string[] {
  if (!c) return ['Coverage: unknown (the pass did not finish).', ''];
  const range =
    c.chainRange.lastSeq >= c.chainRange.firstSeq
      ? `events ${c.chainRange.firstSeq}..${c.chainRange.lastSeq}`
      : 'no events';
  return [
    `Period: ${c.period.from} to ${c.period.to}. Chain range: ${range} — ${c.events.synthetic} of them the pass's own, in its synthetic tenants ${c.syntheticTenants.map((t) => `\`${t}\``).join(' and ')}; ${c.events.other} from other traffic meanwhile.`,
    '',
    'This is a self-test with synthetic users in synthetic tenants: it shows how the deployment answers these attacks, not what real traffic did. Audit excerpts are in the order the events happened (time, then `seq` within a chain).',
    '',
  ];
}
