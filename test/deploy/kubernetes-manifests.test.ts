// Renders every overlay of deploy/kubernetes with `kubectl kustomize` and checks what a
// cluster would: each object against the Kubernetes API schemas (kubernetes-models, plus the
// KEDA and Prometheus Operator models for their kinds), then what operating the product
// needs — probes, requests and limits, non-root and read-only containers, grace periods
// longer than the drains, one ScaledObject per worker pool on that pool's own queues, and no
// secret inlined. Skipped, saying so, where kubectl is not installed.
import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { DEFAULT_DRAIN_MS } from '@mtg/http-serve';
import { loadToolRegistry } from '@mtg/tools';
import { loadUpstreams, upstreamQueue } from '@mtg/upstreams';

const ROOT = fileURLToPath(new URL('../../deploy/kubernetes/', import.meta.url));
const OVERLAYS = readdirSync(`${ROOT}overlays`).sort();

function kubectlVersion(): string | undefined {
  try {
    return execFileSync('kubectl', ['version', '--client'], { encoding: 'utf8' });
  } catch {
    return undefined;
  }
}
const kubectl = kubectlVersion();
const describeWithKubectl = kubectl ? describe : describe.skip;
if (!kubectl) {
  process.stderr.write(
    'kubernetes-manifests: SKIPPED — `kubectl` is not on PATH, so the overlays cannot be ' +
      'rendered (install kubectl ≥ 1.27, which has kustomize built in, to run these checks)\n',
  );
}

type Obj = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: any };
  [k: string]: any;
};
type Model = { new (data: unknown): { validate(): void } };

const MODEL_MODULES = [
  'kubernetes-models/v1',
  'kubernetes-models/apps/v1',
  'kubernetes-models/batch/v1',
  'kubernetes-models/autoscaling/v2',
  'kubernetes-models/policy/v1',
  'kubernetes-models/networking.k8s.io/v1',
  '@kubernetes-models/keda/keda.sh/v1alpha1',
  '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1',
];

async function loadModels(): Promise<Map<string, Model>> {
  const models = new Map<string, Model>();
  for (const m of MODEL_MODULES) {
    for (const value of Object.values(await import(m))) {
      const model = value as Model & { apiVersion?: string; kind?: string };
      if (typeof model === 'function' && model.apiVersion && model.kind) {
        models.set(`${model.apiVersion}/${model.kind}`, model);
      }
    }
  }
  return models;
}

function render(overlay: string): Obj[] {
  const out = execFileSync('kubectl', ['kustomize', `${ROOT}overlays/${overlay}`], {
    encoding: 'utf8',
  });
  return parseAllDocuments(out).map((d) => d.toJS() as Obj);
}

const podTemplate = (o: Obj) =>
  o.kind === 'CronJob' ? o.spec.jobTemplate.spec.template : o.spec?.template;
const envOf = (container: any, objects: Obj[]): Record<string, string> => {
  const env: Record<string, string> = {};
  for (const from of container.envFrom ?? []) {
    const cm = objects.find(
      (o) => o.kind === 'ConfigMap' && o.metadata.name === from.configMapRef?.name,
    );
    Object.assign(env, cm?.data ?? {});
  }
  for (const e of container.env ?? []) if (typeof e.value === 'string') env[e.name] = e.value;
  return env;
};
/** Whether a scaler's query counts a queue: any of its `name LIKE '…'` patterns (ORed). */
const countedBy = (query: string) => {
  const patterns = [...query.matchAll(/name LIKE '([^']+)'/g)].map(
    (m) =>
      new RegExp(
        `^${m[1]!
          .replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
          .replace(/%/g, '.*')
          .replace(/_/g, '.')}$`,
      ),
  );
  return (queue: string) => patterns.some((p) => p.test(queue));
};
const matches = (selector: Record<string, string>, labels: Record<string, string>) =>
  Object.entries(selector).every(([k, v]) => labels?.[k] === v);

const workersOf = (objects: Obj[]) =>
  objects.filter((o) => o.kind === 'Deployment' && o.metadata.name.startsWith('mtg-worker'));
const scalersOfIn = (objects: Obj[], w: Obj) =>
  objects.filter(
    (o) => o.kind === 'ScaledObject' && o.spec.scaleTargetRef.name === w.metadata.name,
  );

/** The workers' UPSTREAMS_FILE, read from the ConfigMap mounted at its path; unset: none. */
async function configuredUpstreams(objects: Obj[], file: string | undefined) {
  if (file === undefined) return [];
  const mounted = workersOf(objects)
    .map((w) => podTemplate(w).spec)
    .flatMap((spec) =>
      (spec.containers[0].volumeMounts ?? []).map((m: any) => ({
        m,
        v: (spec.volumes ?? []).find((v: any) => v.name === m.name),
      })),
    )
    .find(({ m, v }) => v?.configMap && file.startsWith(`${m.mountPath}/`));
  if (!mounted) throw new Error(`UPSTREAMS_FILE ${file} is on no ConfigMap a worker mounts`);
  const cm = objects.find(
    (o) => o.kind === 'ConfigMap' && o.metadata.name === mounted.v.configMap.name,
  )!;
  const local = path.join(await mkdtemp(path.join(os.tmpdir(), 'mtg-upstreams-')), 'u.yaml');
  await writeFile(local, cm.data[file.slice(mounted.m.mountPath.length + 1)]);
  return loadUpstreams(local);
}

/**
 * Each queue the pods would install and serve — one per long tool of the ConfigMap's
 * TOOL_PACKS (`tool.<name>.<fingerprint>`), one per upstream of its UPSTREAMS_FILE
 * (`upstream.<name>`) — with the pools that serve it (WORKER_TOOLS; a worker given
 * UPSTREAMS_FILE serves every upstream's queue, docs/upstreams.md) and those whose scaler
 * query counts it.
 */
async function queueCoverage(objects: Obj[]) {
  const config = objects.find(
    (o) => o.kind === 'ConfigMap' && o.metadata.name.startsWith('mtg-config'),
  )!;
  const registry = await loadToolRegistry({ packs: config.data.TOOL_PACKS.split(','), env: {} });
  const pools = workersOf(objects).map((w) => {
    const env = envOf(podTemplate(w).spec.containers[0], objects);
    const tools = env.WORKER_TOOLS?.split(',');
    return {
      name: w.metadata.name,
      serves: (queue: { tool?: string }) =>
        queue.tool !== undefined
          ? !tools || tools.includes(queue.tool)
          : env.UPSTREAMS_FILE !== undefined,
      counts: countedBy(scalersOfIn(objects, w)[0]!.spec.triggers[0].metadata.query),
      takesUpstreams: !tools,
    };
  });
  const installed: Array<{ name: string; tool?: string }> = [
    ...[...registry.long.keys()].map((tool) => ({ tool, name: registry.entry(tool)!.queue! })),
    ...(await configuredUpstreams(objects, config.data.UPSTREAMS_FILE)).map((u) => ({
      name: upstreamQueue(u.name),
    })),
  ];
  const queues = installed.map((q) => ({
    name: q.name,
    serving: pools.filter((p) => p.serves(q)).map((p) => p.name),
    counting: pools.filter((p) => p.counts(q.name)).map((p) => p.name),
  }));
  return { queues, pools };
}

let models: Map<string, Model>;
beforeAll(async () => {
  models = await loadModels();
});

describeWithKubectl(`kubernetes manifests (${OVERLAYS.join(', ')})`, () => {
  test('the validator refuses an object that breaks the API schema (so passing means something)', () => {
    const Deployment = models.get('apps/v1/Deployment')!;
    const broken = new Deployment({
      metadata: { name: 'broken' },
      spec: {
        selector: { matchLabels: { a: 'b' } },
        template: { spec: { containers: [{ name: 'c', ports: [{ containerPort: 'http' }] }] } },
      },
    });
    expect(() => broken.validate()).toThrow();
  });

  test('with an upstream configured (UPSTREAMS_FILE in the ConfigMap), its queue is checked too: the default pool serves and counts it, per-tool pools that all take it are caught', async () => {
    const withUpstream = async (overlay: string) => {
      const dir = await mkdtemp(path.join(os.tmpdir(), 'mtg-kustomize-'));
      await writeFile(
        path.join(dir, 'upstreams.yaml'),
        'upstreams:\n  ledger:\n    url: https://ledger.example.com/mcp\n    scope: upstream:ledger\n',
      );
      await writeFile(
        path.join(dir, 'kustomization.yaml'),
        [
          'apiVersion: kustomize.config.k8s.io/v1beta1',
          'kind: Kustomization',
          'namespace: mcp-task-gateway',
          'resources:',
          `  - ${path.relative(dir, `${ROOT}overlays/${overlay}`)}`,
          'configMapGenerator:',
          '  - name: mtg-config',
          '    behavior: merge',
          '    literals: [UPSTREAMS_FILE=/etc/mtg/upstreams/upstreams.yaml]',
          '  - name: mtg-upstreams',
          '    files: [upstreams.yaml]',
          'patches:',
          '  - target: { kind: Deployment, name: mtg-worker-.* }',
          '    patch: |-',
          '      - op: add',
          '        path: /spec/template/spec/volumes/-',
          '        value: { name: upstreams, configMap: { name: mtg-upstreams } }',
          '      - op: add',
          '        path: /spec/template/spec/containers/0/volumeMounts/-',
          '        value: { name: upstreams, mountPath: /etc/mtg/upstreams, readOnly: true }',
          '',
        ].join('\n'),
      );
      try {
        const out = execFileSync('kubectl', ['kustomize', dir], { encoding: 'utf8' });
        const coverage = await queueCoverage(parseAllDocuments(out).map((d) => d.toJS() as Obj));
        return coverage.queues.find((q) => q.name === upstreamQueue('ledger'));
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    };
    expect(await withUpstream('external-idp')).toEqual({
      name: 'upstream.ledger',
      serving: ['mtg-worker-all'],
      counting: ['mtg-worker-all'],
    });
    expect(await withUpstream('production')).toEqual({
      name: 'upstream.ledger',
      serving: ['mtg-worker-provision', 'mtg-worker-records', 'mtg-worker-reports'],
      counting: [],
    });
  });

  describe.each(OVERLAYS)('overlay %s', (overlay) => {
    let objects: Obj[];
    beforeAll(() => {
      objects = render(overlay);
    });
    const ofKind = (kind: string) => objects.filter((o) => o.kind === kind);
    const workers = () => workersOf(objects);
    const scalersOf = (w: Obj) => scalersOfIn(objects, w);
    const workloads = () =>
      objects.filter((o) => ['Deployment', 'Job', 'CronJob'].includes(o.kind));

    test('every object is valid against its API schema', () => {
      expect(objects.length).toBeGreaterThan(10);
      for (const o of objects) {
        const Model = models.get(`${o.apiVersion}/${o.kind}`);
        if (!Model) throw new Error(`no schema for ${o.apiVersion} ${o.kind} (${o.metadata.name})`);
        try {
          new Model(o).validate();
        } catch (error) {
          throw new Error(`${o.kind} ${o.metadata.name}: ${(error as Error).message}`, {
            cause: error,
          });
        }
      }
    });

    test('every container has resource requests and limits, runs as non-root on a read-only root filesystem', () => {
      for (const w of workloads()) {
        const spec = podTemplate(w).spec;
        for (const c of [...(spec.initContainers ?? []), ...spec.containers]) {
          const where = `${w.kind} ${w.metadata.name} container ${c.name}`;
          for (const k of ['cpu', 'memory']) {
            expect([where, k, c.resources?.requests?.[k]]).toEqual([where, k, expect.any(String)]);
            expect([where, k, c.resources?.limits?.[k]]).toEqual([where, k, expect.any(String)]);
          }
          expect([
            where,
            c.securityContext?.runAsNonRoot ?? spec.securityContext?.runAsNonRoot,
          ]).toEqual([where, true]);
          expect([where, c.securityContext?.readOnlyRootFilesystem]).toEqual([where, true]);
          expect([where, c.securityContext?.allowPrivilegeEscalation]).toEqual([where, false]);
          expect([where, c.securityContext?.capabilities?.drop]).toEqual([where, ['ALL']]);
        }
        expect(spec.automountServiceAccountToken).toBe(false);
      }
    });

    test('every long-running container has a readiness and a liveness probe', () => {
      for (const d of ofKind('Deployment')) {
        for (const c of podTemplate(d).spec.containers) {
          expect([d.metadata.name, c.readinessProbe?.httpGet?.path]).toEqual([
            d.metadata.name,
            '/readyz',
          ]);
          expect([d.metadata.name, c.livenessProbe?.httpGet?.path]).toEqual([
            d.metadata.name,
            '/healthz',
          ]);
        }
      }
    });

    test('grace periods exceed the drains: the gateway its preStop pause plus request drain, a worker its SHUTDOWN_GRACE_MS', () => {
      const deployments = ofKind('Deployment');
      const gateway = deployments.find((d) => d.metadata.name === 'mtg-gateway')!;
      const g = podTemplate(gateway).spec;
      const preStop = Number(g.containers[0].lifecycle.preStop.exec.command[1]);
      expect(g.terminationGracePeriodSeconds).toBeGreaterThan(preStop + DEFAULT_DRAIN_MS / 1000);
      const workers = deployments.filter((d) => d.metadata.name.startsWith('mtg-worker'));
      expect(workers.length).toBeGreaterThan(0);
      for (const w of workers) {
        const spec = podTemplate(w).spec;
        const grace = Number(envOf(spec.containers[0], objects).SHUTDOWN_GRACE_MS);
        expect(grace).toBeGreaterThan(0);
        // The drain, then closing the queue and database connections: a few seconds more.
        expect(spec.terminationGracePeriodSeconds * 1000).toBeGreaterThanOrEqual(grace + 10_000);
      }
    });

    test("the gateway's Host check lets the probes and scrapes in (they send the pod IP as Host)", () => {
      const gateway = ofKind('Deployment').find((d) => d.metadata.name === 'mtg-gateway')!;
      const env = podTemplate(gateway).spec.containers[0].env as Array<Record<string, any>>;
      const podIp = env.findIndex((e) => e.valueFrom?.fieldRef?.fieldPath === 'status.podIP');
      const allowed = env.findIndex((e) => e.name === 'ALLOWED_HOSTS');
      expect(podIp).toBeGreaterThanOrEqual(0);
      // A $(VAR) reference expands only variables defined before it.
      expect(allowed).toBeGreaterThan(podIp);
      expect(env[allowed]!.value).toBe(`$(PUBLIC_HOSTS),$(${env[podIp]!.name})`);
      const config = ofKind('ConfigMap')[0]!;
      expect(config.data.PUBLIC_HOSTS).toEqual(expect.any(String));
      expect(config.data.ALLOWED_HOSTS).toBeUndefined();
    });

    test('the gateway has several replicas (by its HPA), an HPA on CPU, a PodDisruptionBudget and a Service', () => {
      const gateway = ofKind('Deployment').find((d) => d.metadata.name === 'mtg-gateway')!;
      const hpa = ofKind('HorizontalPodAutoscaler').find(
        (h) => h.spec.scaleTargetRef.name === 'mtg-gateway',
      )!;
      expect(hpa.spec.minReplicas).toBeGreaterThan(1);
      expect(hpa.spec.metrics[0].resource.name).toBe('cpu');
      const labels = podTemplate(gateway).metadata.labels;
      expect(
        ofKind('PodDisruptionBudget').some((p) => matches(p.spec.selector.matchLabels, labels)),
      ).toBe(true);
      expect(ofKind('Service').some((s) => matches(s.spec.selector, labels))).toBe(true);
    });

    test('each worker pool has a PodDisruptionBudget and a KEDA ScaledObject on its own queues', () => {
      for (const w of workers()) {
        const labels = podTemplate(w).metadata.labels;
        const pdbs = ofKind('PodDisruptionBudget').filter((p) =>
          matches(p.spec.selector.matchLabels, labels),
        );
        expect([w.metadata.name, pdbs.length]).toEqual([w.metadata.name, 1]);
        const scaled = scalersOf(w);
        expect([w.metadata.name, scaled.length]).toEqual([w.metadata.name, 1]);
        const trigger = scaled[0]!.spec.triggers[0];
        expect(trigger.type).toBe('postgresql');
        expect(trigger.metadata.query).toContain("state IN ('created', 'retry')");
      }
    });

    test('every queue of the configured packs and upstreams is served by exactly one pool, and counted by that pool’s scaler alone', async () => {
      const coverage = await queueCoverage(objects);
      expect(coverage.queues.length).toBeGreaterThan(0);
      for (const q of coverage.queues) {
        expect([q.name, q.serving.length, q.counting]).toEqual([q.name, 1, q.serving]);
      }
      // A pool of every tool takes the upstreams' queues too once UPSTREAMS_FILE is set, so its
      // scaler counts them before any is configured.
      for (const p of coverage.pools.filter((p) => p.takesUpstreams)) {
        expect([p.name, p.counts(upstreamQueue('any'))]).toEqual([p.name, true]);
      }
    });

    test('no Deployment an autoscaler owns pins its replicas (an apply would reset the count)', () => {
      const scaled = [
        ...ofKind('HorizontalPodAutoscaler').map((h) => h.spec.scaleTargetRef),
        ...ofKind('ScaledObject').map((s) => s.spec.scaleTargetRef),
      ].map((ref) => `${ref.kind}/${ref.name}`);
      expect(scaled).toContain('Deployment/mtg-gateway');
      for (const d of ofKind('Deployment')) {
        if (!scaled.includes(`Deployment/${d.metadata.name}`)) continue;
        expect([d.metadata.name, d.spec.replicas]).toEqual([d.metadata.name, undefined]);
      }
    });

    test('the console: replicas sharing sessions through the database, its own login and key, the public checkpoint keys only', () => {
      const console_ = ofKind('Deployment').find((d) => d.metadata.name === 'mtg-console')!;
      expect(console_.spec.replicas).toBeGreaterThan(1);
      const spec = podTemplate(console_).spec;
      const c = spec.containers[0];
      expect(c.command).toEqual(['mcp-task-gateway', 'console']);
      const secretOf = (name: string) =>
        (c.env as Array<Record<string, any>>).find((e) => e.name === name)?.valueFrom?.secretKeyRef;
      expect(secretOf('DATABASE_URL')).toMatchObject({ name: 'mtg-database', key: 'console-url' });
      expect(spec.initContainers[0].env[0].valueFrom.secretKeyRef.key).toBe('console-url');
      expect(secretOf('CONSOLE_SESSION_KEYS')).toMatchObject({ name: 'mtg-console' });
      expect(secretOf('CONSOLE_SESSION_KEYS').optional).toBeUndefined();
      // Chain status needs the public JWKS; the signing key never reaches the console.
      const jwks = spec.volumes.find((v: any) => v.secret?.secretName === 'mtg-audit-keys');
      expect(jwks.secret.items).toEqual([{ key: 'jwks.json', path: 'jwks.json' }]);
      const env = envOf(c, objects);
      const mount = c.volumeMounts.find((m: any) => m.name === jwks.name);
      expect(env.AUDIT_JWKS_FILE).toBe(`${mount.mountPath}/jwks.json`);
      expect(env.CONSOLE_URL).toMatch(/^https:\/\//);
      const port = c.ports[0].containerPort;
      expect(String(port)).toBe(env.CONSOLE_PORT);
      const labels = podTemplate(console_).metadata.labels;
      expect(
        ofKind('Service').some(
          (s) => matches(s.spec.selector, labels) && s.spec.ports[0].targetPort === 'http',
        ),
      ).toBe(true);
      expect(
        ofKind('PodDisruptionBudget').some((p) => matches(p.spec.selector.matchLabels, labels)),
      ).toBe(true);
      // Past the default deny: in on its port, and out to DNS, PostgreSQL and HTTPS.
      const ingress = ofKind('NetworkPolicy').filter(
        (p) =>
          Object.keys(p.spec.podSelector).length > 0 &&
          matches(p.spec.podSelector.matchLabels, labels) &&
          p.spec.policyTypes.includes('Ingress'),
      );
      expect(ingress.flatMap((p) => p.spec.ingress.flatMap((r: any) => r.ports))).toEqual([
        { port, protocol: 'TCP' },
      ]);
      expect(ofKind('ServiceAccount').map((a) => a.metadata.name)).toContain(
        spec.serviceAccountName,
      );
    });

    test('the migrations Job runs the migrations with the same ConfigMap (TOOL_PACKS) as the apps', () => {
      const [job] = ofKind('Job');
      expect(job!.spec.template.spec.containers[0].command).toEqual([
        'mcp-task-gateway',
        'migrate',
      ]);
      const config = job!.spec.template.spec.containers[0].envFrom[0].configMapRef.name;
      for (const d of ofKind('Deployment')) {
        const spec = podTemplate(d).spec;
        expect(spec.containers[0].envFrom[0].configMapRef.name).toBe(config);
        expect(spec.initContainers[0].command).toEqual(['mcp-task-gateway', 'wait-for-migrations']);
      }
    });

    test('secrets are referenced, never inlined, and the dev IdP is not deployed', () => {
      expect(ofKind('Secret')).toEqual([]);
      for (const w of workloads()) {
        for (const c of [
          ...(podTemplate(w).spec.initContainers ?? []),
          ...podTemplate(w).spec.containers,
        ]) {
          expect(c.command.join(' ')).not.toContain('apps/idp');
          for (const e of c.env ?? []) {
            if (
              /SECRET|KEY|TOKEN|PASSWORD|DATABASE_URL|AUTH$/.test(e.name) &&
              !e.name.endsWith('_FILE')
            ) {
              expect([c.name, e.name, e.valueFrom?.secretKeyRef?.name]).toEqual([
                c.name,
                e.name,
                expect.any(String),
              ]);
            }
          }
        }
      }
      for (const cm of ofKind('ConfigMap')) {
        expect(
          Object.keys(cm.data).filter((k) => /SECRET|PASSWORD|TOKEN|DATABASE_URL/.test(k)),
        ).toEqual([]);
      }
    });

    test('every pod may reach DNS and PostgreSQL past the default deny', () => {
      const egress = ofKind('NetworkPolicy').filter((p) => p.spec.policyTypes.includes('Egress'));
      const allows = (labels: Record<string, string>, port: number) =>
        egress.some(
          (p) =>
            Object.keys(p.spec.podSelector).length > 0 &&
            matches(p.spec.podSelector.matchLabels ?? {}, labels) &&
            (p.spec.egress ?? []).some((rule: any) =>
              (rule.ports ?? []).some((x: any) => x.port === port),
            ),
        );
      for (const w of workloads()) {
        const labels = podTemplate(w).metadata.labels;
        expect([w.metadata.name, allows(labels, 53), allows(labels, 5432)]).toEqual([
          w.metadata.name,
          true,
          true,
        ]);
      }
    });

    test('the audit CronJobs sign and verify hourly and archive monthly', () => {
      const jobs = Object.fromEntries(ofKind('CronJob').map((c) => [c.metadata.name, c]));
      const command = (name: string) =>
        jobs[name]!.spec.jobTemplate.spec.template.spec.containers[0].command.join(' ');
      expect(command('mtg-audit-checkpoint')).toContain('mcp-task-gateway audit checkpoint');
      expect(command('mtg-audit-checkpoint')).toContain(
        'mcp-task-gateway audit verify --from-checkpoint latest --record',
      );
      // A chain the signer refused (exit 1) is still verified and recorded: that raises the alert.
      expect(command('mtg-audit-checkpoint')).not.toMatch(/audit checkpoint\s*&&/);
      expect(command('mtg-audit-archive')).toContain(
        'mcp-task-gateway audit archive --out /archive',
      );
      expect(jobs['mtg-audit-archive']!.spec.concurrencyPolicy).toBe('Forbid');
    });

    test('a default-deny NetworkPolicy and ServiceMonitors for the gateways and the workers', () => {
      const deny = ofKind('NetworkPolicy').find(
        (p) => Object.keys(p.spec.podSelector).length === 0,
      );
      expect(deny?.spec.policyTypes).toEqual(['Ingress', 'Egress']);
      expect(
        ofKind('ServiceMonitor')
          .map((s) => s.metadata.name)
          .sort(),
      ).toEqual(['mtg-gateway', 'mtg-worker']);
    });
  });
});
