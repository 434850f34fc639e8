// The Grafana dashboard and the Prometheus alert rules in deploy/ parse, are well-formed, and
// use only metrics a running gateway and worker really expose at /metrics.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { freePort, startStack, type Stack } from '../support/stack.ts';

const file = (p: string) =>
  readFileSync(fileURLToPath(new URL(`../../deploy/${p}`, import.meta.url)), 'utf8');

interface Rule {
  alert: string;
  expr: string;
  for?: string;
  labels: { severity: string };
  annotations: { summary: string; description?: string };
}

const dashboard = JSON.parse(file('grafana/mcp-task-gateway.json')) as {
  uid: string;
  panels: Array<{ type: string; title: string; targets?: Array<{ expr: string }> }>;
};
const rules = (
  parse(file('prometheus/alert-rules.yaml')) as { groups: Array<{ rules: Rule[] }> }
).groups.flatMap((g) => g.rules);
const dashboardExprs = dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr));
const metricsIn = (expr: string) => [...expr.matchAll(/\bmtg_[a-z0-9_]+/g)].map((m) => m[0]);

let stack: Stack;
let exposed: Set<string>;
beforeAll(async () => {
  stack = await startStack({ workers: 0 });
  const port = await freePort();
  await stack.addWorker({ WORKER_METRICS_PORT: String(port) });
  exposed = new Set();
  for (const url of [`${stack.gatewayUrl}/metrics`, `http://127.0.0.1:${port}/metrics`]) {
    const text = await (await fetch(url)).text();
    // Every registered metric has its TYPE line, even before its first sample.
    for (const [, name, type] of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
      exposed.add(name!);
      if (type === 'histogram')
        for (const s of ['_bucket', '_sum', '_count']) exposed.add(`${name}${s}`);
    }
  }
});
afterAll(async () => {
  await stack?.close();
});

test('every metric the dashboard and the alert rules use is exposed by the gateway or a worker', () => {
  const used = new Set([...dashboardExprs, ...rules.map((r) => r.expr)].flatMap(metricsIn));
  expect(used.size).toBeGreaterThan(15);
  expect([...used].filter((m) => !exposed.has(m))).toEqual([]);
});

test('the dashboard has a query on every panel and shows tasks, queues per pool, latency, denials, circuits and the audit chain', () => {
  expect(dashboard.uid).toBe('mcp-task-gateway');
  const graphs = dashboard.panels.filter((p) => p.type !== 'row');
  for (const p of graphs) expect([p.title, p.targets?.length ?? 0]).not.toEqual([p.title, 0]);
  const all = dashboardExprs.join('\n');
  for (const m of [
    'mtg_tasks',
    'mtg_queue_depth',
    'mtg_task_duration_seconds_bucket',
    'mtg_http_request_duration_seconds_bucket',
    'mtg_denials_total',
    'mtg_downstream_circuit_state',
    'mtg_audit_checkpoint_age_seconds',
    'mtg_audit_verification_ok',
  ])
    expect(all).toContain(m);
});

test('every alert rule is well-formed, and the rules cover verification, checkpoints, queues, circuits, denials and exchanges', () => {
  for (const r of rules) {
    expect([r.alert, typeof r.expr, r.labels?.severity, typeof r.annotations?.summary]).toEqual([
      r.alert,
      'string',
      expect.stringMatching(/^(critical|warning)$/),
      'string',
    ]);
    let depth = 0;
    for (const ch of r.expr) {
      depth += ch === '(' ? 1 : ch === ')' ? -1 : 0;
      expect([r.alert, depth >= 0]).toEqual([r.alert, true]);
    }
    expect([r.alert, depth]).toEqual([r.alert, 0]);
    if (r.for) expect(r.for).toMatch(/^\d+[smh]$/);
  }
  const byMetric = (m: string) => rules.some((r) => r.expr.includes(m));
  for (const m of [
    'mtg_audit_verification_ok',
    'mtg_audit_checkpoint_age_seconds',
    'mtg_queue_depth',
    'mtg_downstream_circuit_state',
    'mtg_denials_total',
    'mtg_token_exchange_failures_total',
  ])
    expect([m, byMetric(m)]).toEqual([m, true]);
});
