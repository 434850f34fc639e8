import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import {
  loadPolicyFile,
  parsePolicy,
  parseSpiffeId,
  PolicyFileError,
  type Policy,
  type Workload,
} from '../src/index.ts';

const TOOLS = ['whoami', 'generate_report', 'bulk_update_records', 'get_job_status', 'list_jobs'];
const ALL = ['reports:run', 'records:write', 'env:provision'];

const client = (id: string): Workload => ({ kind: 'oauth-client', id });
const spiffe = (id: string, c = 'mcp-agent'): Workload => ({
  kind: 'spiffe',
  id,
  client: c,
  via: 'tls',
});

const yaml = (text: string) => parsePolicy(text, 'policy.yaml', { knownTools: TOOLS });

describe('loading a policy file', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'mtg-policy-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const problemOf = async (name: string, text: string) => {
    const file = path.join(dir, name);
    await writeFile(file, text);
    const error = await loadPolicyFile(file, { knownTools: TOOLS }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(PolicyFileError);
    expect((error as PolicyFileError).message).toContain(file);
    return error as PolicyFileError;
  };

  test('a YAML file and the same policy as JSON load to the same decisions', async () => {
    const y = path.join(dir, 'ok.yaml');
    await writeFile(y, 'workloads:\n  - id: mcp-agent\n    tools: [whoami]\ndefault: deny\n');
    const j = path.join(dir, 'ok.json');
    await writeFile(
      j,
      JSON.stringify({ workloads: [{ id: 'mcp-agent', tools: ['whoami'] }], default: 'deny' }),
    );
    for (const file of [y, j]) {
      const policy = await loadPolicyFile(file, { knownTools: TOOLS });
      expect(policy.source).toBe(file);
      expect(policy.decide(client('mcp-agent'), 'whoami', []).allowed).toBe(true);
      expect(policy.decide(client('mcp-agent'), 'list_jobs', []).allowed).toBe(false);
    }
  });

  test('a missing file names the file and says it cannot be read', async () => {
    const file = path.join(dir, 'absent.yaml');
    await expect(loadPolicyFile(file)).rejects.toThrow(
      `policy file ${file}: cannot be read (ENOENT)`,
    );
  });

  test('broken YAML is a syntax error naming the file', async () => {
    const e = await problemOf('broken.yaml', 'workloads: [\n  - id: x\n');
    expect(e.code).toBe('policy_syntax');
    expect(e.message).toMatch(/not valid YAML/);
  });

  test('a duplicate YAML key is refused rather than the last one silently winning', async () => {
    const e = await problemOf('dup.yaml', 'default: allow\ndefault: deny\n');
    expect(e.code).toBe('policy_syntax');
  });

  test('broken JSON is a syntax error naming the file', async () => {
    const e = await problemOf('broken.json', '{"default": ');
    expect(e.code).toBe('policy_syntax');
    expect(e.message).toMatch(/not valid JSON/);
  });

  test('an unknown extension is refused', async () => {
    const e = await problemOf('policy.toml', 'default = "deny"');
    expect(e.message).toMatch(/must end in \.yaml, \.yml or \.json/);
  });

  test('an unknown tool is named with its place in the file', async () => {
    const e = await problemOf(
      'typo.yaml',
      'workloads:\n  - id: mcp-agent\n    tools: [whoami, generate_reprot]\ndefault: deny\n',
    );
    expect(e.code).toBe('policy_invalid');
    expect(e.problems).toEqual(['workloads[0].tools[1]: unknown tool "generate_reprot"']);
  });

  test('every problem of an invalid file is listed', async () => {
    const e = await problemOf(
      'many.yaml',
      [
        'workloads:',
        '  - id: mcp-agent',
        '    tool: [whoami]',
        '  - id: spiffe://Example.org/agent',
        '    tools: []',
        '  - id: spiffe://example.org/a*',
        '    tools: []',
        '  - id: spiffe://example.org/**/x',
        '    tools: []',
        '  - id: "client *"',
        '    tools: []',
        'tools:',
        '  nope: { scopes: [x] }',
        'default: maybe',
      ].join('\n'),
    );
    expect(e.problems).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^workloads\[0\]/),
        expect.stringMatching(/^workloads\[1\]\.id: .*not a valid SPIFFE ID/),
        expect.stringMatching(/^workloads\[2\]\.id: "\*" matches whole path segments only/),
        expect.stringMatching(/^workloads\[3\]\.id: "\*\*" is allowed only as the last/),
        'workloads[4].id: an OAuth client id has no whitespace or "*" (globs are for SPIFFE IDs)',
        'tools.nope: unknown tool "nope"',
        'default: must be "deny" or "allow"',
      ]),
    );
  });

  test('semantic problems are listed once the shape is right', async () => {
    const e = await problemOf(
      'semantic.yaml',
      [
        'workloads:',
        '  - id: mcp-agent',
        '    tools: []',
        '  - id: mcp-agent',
        '    tools: [whoami]',
        '  - id: mcp-agent-2',
        '    tools: []',
        '    clients: [mcp-agent]',
        'default: deny',
      ].join('\n'),
    );
    expect(e.problems).toEqual([
      'workloads[1].id: "mcp-agent" is listed twice',
      'workloads[2].clients: only a SPIFFE entry binds OAuth clients',
    ]);
  });

  test('an empty file is invalid: the default must be chosen explicitly', async () => {
    const e = await problemOf('empty.yaml', '');
    expect(e.problems).toEqual([expect.stringMatching(/^default: /)]);
  });
});

describe('deciding', () => {
  let policy: Policy;
  beforeAll(() => {
    policy = yaml(`
workloads:
  - id: mcp-agent
    tools: [whoami, generate_report]
  - id: mcp-agent-2
    tools: []
  - id: spiffe://example.org/agent/ci
    tools: [whoami, bulk_update_records]
    clients: [mcp-agent-2]
  - id: spiffe://example.org/agent/*
    tools: [whoami]
  - id: spiffe://example.org/batch/**
    tools: ['*']
    clients: ['*']
tools:
  generate_report: { scopes: [reports:run, env:provision] }
default: deny
`);
  });

  test('an OAuth client gets the tools its entry names and nothing else', () => {
    expect(policy.decide(client('mcp-agent'), 'whoami', ALL)).toEqual({
      allowed: true,
      entry: 'mcp-agent',
    });
    expect(policy.decide(client('mcp-agent'), 'list_jobs', ALL)).toEqual({
      allowed: false,
      rule: 'tool_not_allowed',
      entry: 'mcp-agent',
    });
  });

  test('an unlisted OAuth client is denied under default deny', () => {
    expect(policy.decide(client('stranger'), 'whoami', ALL)).toEqual({
      allowed: false,
      rule: 'unlisted_workload',
      entry: null,
    });
  });

  test('scopes from the tools section are required on top of the entry', () => {
    expect(policy.decide(client('mcp-agent'), 'generate_report', ['reports:run'])).toEqual({
      allowed: false,
      rule: 'missing_scopes',
      entry: 'mcp-agent',
      missingScopes: ['env:provision'],
    });
    expect(policy.decide(client('mcp-agent'), 'generate_report', ALL).allowed).toBe(true);
  });

  test('an exact SPIFFE entry wins over a pattern that also matches', () => {
    const d = policy.decide(
      spiffe('spiffe://example.org/agent/ci', 'mcp-agent-2'),
      'bulk_update_records',
      ALL,
    );
    expect(d).toEqual({ allowed: true, entry: 'spiffe://example.org/agent/ci' });
  });

  test('a SPIFFE workload grants what its OAuth client alone could not', () => {
    expect(policy.decide(client('mcp-agent-2'), 'whoami', ALL).allowed).toBe(false);
    expect(
      policy.decide(spiffe('spiffe://example.org/agent/ci', 'mcp-agent-2'), 'whoami', ALL).allowed,
    ).toBe(true);
  });

  test('a SPIFFE entry with clients refuses tokens of other OAuth clients', () => {
    expect(
      policy.decide(spiffe('spiffe://example.org/agent/ci', 'mcp-agent'), 'whoami', ALL),
    ).toEqual({
      allowed: false,
      rule: 'client_not_bound',
      entry: 'spiffe://example.org/agent/ci',
    });
  });

  test('a SPIFFE entry without clients admits only OAuth clients the policy lists', () => {
    const glob = 'spiffe://example.org/agent/*';
    expect(
      policy.decide(spiffe('spiffe://example.org/agent/build', 'mcp-agent'), 'whoami', ALL),
    ).toEqual({ allowed: true, entry: glob });
    expect(
      policy.decide(spiffe('spiffe://example.org/agent/build', 'stranger'), 'whoami', ALL),
    ).toEqual({
      allowed: false,
      rule: 'client_not_bound',
      entry: glob,
    });
  });

  test('"*" matches one path segment and a trailing "**" a whole subtree', () => {
    expect(policy.decide(spiffe('spiffe://example.org/agent/build/x'), 'whoami', ALL).allowed).toBe(
      false,
    );
    expect(policy.decide(spiffe('spiffe://example.org/agent'), 'whoami', ALL).allowed).toBe(false);
    expect(
      policy.decide(spiffe('spiffe://example.org/batch/a/b', 'anyone'), 'list_jobs', ALL).allowed,
    ).toBe(true);
    expect(
      policy.decide(spiffe('spiffe://example.org/batch', 'anyone'), 'list_jobs', ALL).allowed,
    ).toBe(false);
    expect(
      policy.decide(spiffe('spiffe://other.org/agent/ci', 'mcp-agent-2'), 'whoami', ALL),
    ).toMatchObject({ rule: 'unlisted_workload' });
  });

  test('under default allow an unlisted SPIFFE ID adds nothing: the OAuth client decides', () => {
    const open = yaml('workloads:\n  - id: mcp-agent\n    tools: [whoami]\ndefault: allow\n');
    expect(open.decide(client('stranger'), 'list_jobs', ALL).allowed).toBe(true);
    expect(
      open.decide(spiffe('spiffe://example.org/x', 'mcp-agent'), 'list_jobs', ALL),
    ).toMatchObject({ allowed: false, rule: 'tool_not_allowed' });
    expect(open.decide(spiffe('spiffe://example.org/x', 'mcp-agent'), 'whoami', ALL).allowed).toBe(
      true,
    );
  });

  test('an OAuth client id that looks like a SPIFFE ID never matches a SPIFFE entry', () => {
    expect(policy.decide(client('spiffe://example.org/batch/a'), 'whoami', ALL)).toMatchObject({
      allowed: false,
      rule: 'unlisted_workload',
    });
  });
});

describe('SPIFFE IDs', () => {
  test.each([
    ['spiffe://example.org/agent/ci', true],
    ['spiffe://example.org', true],
    ['spiffe://Example.org/a', false],
    ['SPIFFE://example.org/a', false],
    ['spiffe://example.org/a/', false],
    ['spiffe://example.org//a', false],
    ['spiffe://example.org/a/../b', false],
    ['spiffe://example.org:443/a', false],
    ['spiffe://user@example.org/a', false],
    ['spiffe://example.org/a?x=1', false],
    ['spiffe://example.org/a#f', false],
  ])('%s valid: %s', (id, valid) => {
    expect(parseSpiffeId(id) !== undefined).toBe(valid);
  });
});
