import { AsyncLocalStorage } from 'node:async_hooks';
import { createHash } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import { nowMs, type Clock } from '@mtg/clock';
import {
  countInTurn,
  countInTurnWithin,
  createWindowCounter,
  type CountChain,
  type Pool,
  type PreparedStatement,
  type TurnRefusal,
  type WindowCount,
} from '@mtg/db';
import type { Principal } from '@mtg/identity';

/**
 * Glossary
 * - starts: task starts per subject (tenant + subject) per minute.
 * - client_starts: task starts per OAuth client (the agent application) within one tenant,
 *   across its users there, per minute: one tenant's busy users cannot lock another tenant
 *   out of an application they share.
 * - tenant_starts: task starts per tenant, across its clients and users, per minute.
 * - polls: status and result reads per caller (tenant + subject + client) per second.
 * - controls: cancels and lists per caller per second, as many as polls but counted apart,
 *   so a caller polling at its limit can still cancel.
 * A limit of 0 is off. Counters live in app.rate_limits (migration 020), so every gateway
 * replica shares them; fixed windows on the gateway's clock, counted with one upsert per
 * request (createWindowCounter, @mtg/db).
 */
export interface RateLimitSettings {
  startsPerMinute: number;
  clientStartsPerMinute: number;
  tenantStartsPerMinute: number;
  pollsPerSecond: number;
}

export type LimitName = 'starts' | 'client_starts' | 'tenant_starts' | 'polls' | 'controls';

export type RateDecision =
  | { ok: true }
  | {
      ok: false;
      limit: LimitName;
      retryAfterSeconds: number;
      /** The first denial of this caller in this window (cluster-wide): the one to audit. */
      firstInWindow: boolean;
    };

export interface RateLimits {
  start(principal: Principal): Promise<RateDecision>;
  poll(principal: Principal): Promise<RateDecision>;
  /** tasks/cancel, tasks/list and the job tools' cancel_job, list_jobs. */
  control(principal: Principal): Promise<RateDecision>;
  /**
   * Middleware for the MCP route: when a limit denied something while this request was
   * handled, its HTTP response carries `Retry-After` too (the JSON-RPC answer has the hint
   * in its own shape).
   */
  retryAfterHeader(req: Request, res: Response, next: NextFunction): void;
  /** Records a denial's hint for the request being handled (see retryAfterHeader). */
  noteDenied(retryAfterSeconds: number): void;
  /**
   * Counts the poll of the request being handled inside `statement` (a count with a lookup
   * beside it, WindowCounter.countWithin), so a poll's count and its revocation check are one
   * round trip; the request's first poll-bucket verb then spends that count instead of
   * counting again. Answers the statement's row, or undefined when it did not run: the poll
   * limit is off, the caller is refused from memory until its window ends, or no request is
   * being handled (outside retryAfterHeader) — the caller then makes its lookup alone.
   */
  countPollWithin<R extends Record<string, unknown>>(
    principal: Principal,
    statement: PreparedStatement,
    extra: unknown[],
  ): Promise<R | undefined>;
  /**
   * As countPollWithin, for a start: the start limits' chain (subject, client, tenant) is
   * counted inside the statement `statementFor` builds around it (a CountChain), and the
   * request's start spends that count. Undefined when it did not run: no start limit is on,
   * the subject's count is refused from memory, or no request is being handled.
   */
  countStartWithin<R extends Record<string, unknown>>(
    principal: Principal,
    statementFor: (chain: CountChain) => PreparedStatement,
    extra: unknown[],
  ): Promise<R | undefined>;
}

/** What one request carries across its middleware and verbs (retryAfterHeader opens it). */
interface RequestLimits {
  retryAfterSeconds?: number;
  /** The poll count countPollWithin made, for the request's first poll verb. */
  prepaidPoll?: { key: string; decision: RateDecision };
  /**
   * The start counts countStartWithin made, for the request's start; `window` names the
   * limit window whose first refusal it is (owed until spent).
   */
  prepaidStart?: { key: string; decision: RateDecision; window?: string };
}

export function createRateLimits(options: {
  pool: Pool;
  settings: RateLimitSettings;
  /** Opens and closes the windows (default: the system clock); tests move it. */
  clock?: Clock;
}): RateLimits {
  const limiter = (name: LimitName, points: number, durationSeconds: number) => {
    if (points <= 0) return undefined;
    return {
      points,
      consume: createWindowCounter({
        pool: options.pool,
        prefix: name,
        points,
        durationMs: durationSeconds * 1000,
        ...(options.clock ? { clock: options.clock } : {}),
      }),
    };
  };
  const s = options.settings;
  const starts = limiter('starts', s.startsPerMinute, 60);
  const clientStarts = limiter('client_starts', s.clientStartsPerMinute, 60);
  const tenantStarts = limiter('tenant_starts', s.tenantStartsPerMinute, 60);
  const polls = limiter('polls', s.pollsPerSecond, 1);
  const controls = limiter('controls', s.pollsPerSecond, 1);
  const hints = new AsyncLocalStorage<RequestLimits>();

  const decide = (
    name: LimitName,
    l: NonNullable<ReturnType<typeof limiter>>,
    counted: WindowCount,
  ): RateDecision => {
    if (counted.ok) return counted;
    return {
      ok: false,
      limit: name,
      retryAfterSeconds: Math.max(1, Math.ceil(counted.msBeforeNext / 1000)),
      // The store counts atomically, so exactly one request sees points + 1 per window;
      // requests refused from memory report 0.
      firstInWindow: counted.consumed === l.points + 1,
    };
  };
  const consume = async (
    name: LimitName,
    l: ReturnType<typeof limiter>,
    key: string,
  ): Promise<RateDecision> => {
    if (!l) return { ok: true };
    return decide(name, l, await l.consume(hashKey(key)));
  };
  const callerKey = (p: Principal) => `${p.tenant}\u0000${p.subject}\u0000${p.client}`;
  const startSteps = (p: Principal) =>
    (
      [
        ['starts', starts, `${p.tenant}\u0000${p.subject}`],
        ['client_starts', clientStarts, `${p.tenant}\u0000${p.client}`],
        ['tenant_starts', tenantStarts, p.tenant],
      ] as const
    ).flatMap(([name, l, key]) => (l ? [{ name, l, counter: l.consume, key: hashKey(key) }] : []));
  /** The chain's verdict, and the window (limit and key) that refused it. */
  const startDecision = (
    steps: ReturnType<typeof startSteps>,
    refused: TurnRefusal | undefined,
  ): { decision: RateDecision; window?: string } => {
    if (!refused) return { decision: { ok: true } };
    const step = steps[refused.index]!;
    return {
      decision: decide(step.name, step.l, refused.count),
      window: `${step.name}:${step.key}`,
    };
  };
  // Start windows whose first refusal was counted beside a revocation check for a request that
  // was answered before its start (its arguments, the tool policy: countStartWithin), until
  // that window ends: the next start that window refuses here is the one audited. Per replica,
  // as refusals from memory are.
  const owedAudits = new Map<string, number>();
  const owe = (window: string, msBeforeNext: number) => {
    const at = nowMs(options.clock);
    if (owedAudits.size >= 10_000)
      for (const [k, until] of owedAudits) if (until <= at) owedAudits.delete(k);
    owedAudits.set(window, at + msBeforeNext);
  };
  const paid = (d: { decision: RateDecision; window?: string }): RateDecision => {
    const until = d.window === undefined ? undefined : owedAudits.get(d.window);
    if (until === undefined || d.decision.ok) return d.decision;
    owedAudits.delete(d.window!);
    return until > nowMs(options.clock) ? { ...d.decision, firstInWindow: true } : d.decision;
  };

  return {
    // The subject's, then the client's, then the tenant's count, each only if the one before
    // allowed the start: one statement (countInTurn).
    async start(p) {
      const request = hints.getStore();
      if (request?.prepaidStart?.key === callerKey(p)) {
        const { decision, window } = request.prepaidStart;
        request.prepaidStart = undefined;
        // Its refusal, first in its window, is audited now.
        if (window !== undefined) owedAudits.delete(window);
        return decision;
      }
      const steps = startSteps(p);
      if (steps.length === 0) return { ok: true };
      return paid(startDecision(steps, await countInTurn(steps)));
    },
    async poll(p) {
      if (!polls) return { ok: true };
      const key = hashKey(callerKey(p));
      const request = hints.getStore();
      if (request?.prepaidPoll?.key === key) {
        const { decision } = request.prepaidPoll;
        request.prepaidPoll = undefined;
        return decision;
      }
      return decide('polls', polls, await polls.consume(key));
    },
    control: (p) => consume('controls', controls, callerKey(p)),
    async countPollWithin<R extends Record<string, unknown>>(
      p: Principal,
      statement: PreparedStatement,
      extra: unknown[],
    ) {
      const request = hints.getStore();
      if (!polls || !request) return undefined;
      const key = hashKey(callerKey(p));
      const { count, row } = await polls.consume.countWithin<R>(key, statement, extra);
      request.prepaidPoll = { key, decision: decide('polls', polls, count) };
      return row;
    },
    async countStartWithin<R extends Record<string, unknown>>(
      p: Principal,
      statementFor: (chain: CountChain) => PreparedStatement,
      extra: unknown[],
    ) {
      const request = hints.getStore();
      const steps = startSteps(p);
      if (!request || steps.length === 0) return undefined;
      const { refusal, row } = await countInTurnWithin<R>(steps, statementFor, extra);
      if (!row) return undefined;
      const { decision, window } = startDecision(steps, refusal);
      // Owed until the request's start spends it: a request answered before its start
      // leaves this window's first refusal to the next one.
      const first = !decision.ok && decision.firstInWindow && window !== undefined;
      if (first) owe(window, refusal!.count.msBeforeNext);
      request.prepaidStart = { key: callerKey(p), decision, ...(first ? { window } : {}) };
      return row;
    },
    retryAfterHeader(_req, res, next) {
      const hint: RequestLimits = {};
      // eslint-disable-next-line @typescript-eslint/unbound-method -- called below with .apply(this)
      const writeHead = res.writeHead;
      res.writeHead = function (this: Response, ...args: Parameters<Response['writeHead']>) {
        if (hint.retryAfterSeconds !== undefined && !this.hasHeader('retry-after')) {
          this.setHeader('Retry-After', String(hint.retryAfterSeconds));
        }
        return writeHead.apply(this, args);
      } as Response['writeHead'];
      hints.run(hint, next);
    },
    noteDenied(retryAfterSeconds) {
      const hint = hints.getStore();
      if (hint) hint.retryAfterSeconds = Math.max(hint.retryAfterSeconds ?? 0, retryAfterSeconds);
    },
  };
}

/** Keys are hashed: fixed length for the varchar(255) column, and no identifiers in clear. */
function hashKey(key: string): string {
  return createHash('sha256').update(key).digest('base64url');
}
