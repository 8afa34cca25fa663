// Fixed-window counters (rate-limiter-flexible) over memory or a shared Redis, combined into one
// decision: every window consumes a point; the request passes only when all of them allow it.
import type { Redis } from "ioredis";
import {
  type RateLimiterAbstract,
  RateLimiterMemory,
  RateLimiterRedis,
  RateLimiterRes,
} from "rate-limiter-flexible";
import { RateLimitError } from "../errors.ts";

export interface WindowSpec {
  /** Names the counter in the store, e.g. `user:min`. */
  name: string;
  points: number;
  durationS: number;
}

export interface WindowState {
  name: string;
  limit: number;
  remaining: number;
  /** Epoch milliseconds at which the window's counter resets. */
  resetAtMs: number;
  exceeded: boolean;
}

export interface CounterStore {
  /** A counter for one window; windows with 0 points are switched off and give null. */
  counter(spec: WindowSpec): RateLimiterAbstract | null;
}

export function memoryStore(prefix: string): CounterStore {
  return {
    counter(spec) {
      if (spec.points <= 0) return null;
      return new RateLimiterMemory({
        keyPrefix: `${prefix}:${spec.name}`,
        points: spec.points,
        duration: spec.durationS,
      });
    },
  };
}

/**
 * The in-memory counter a Redis counter falls back to (rate-limiter-flexible's insuranceLimiter):
 * it is consulted only when Redis did not answer, and says so on every decision it makes.
 */
class FallbackCounter extends RateLimiterMemory {
  readonly #onUse: () => void;
  constructor(opts: ConstructorParameters<typeof RateLimiterMemory>[0], onUse: () => void) {
    super(opts);
    this.#onUse = onUse;
  }
  override consume(key: string | number, points?: number, options?: Record<string, unknown>) {
    this.#onUse();
    return super.consume(key, points, options);
  }
}

/**
 * Counters in Redis, shared by every process. While Redis is unreachable (not connected, or a
 * command not answered within the client's command timeout) each process counts in its own
 * memory instead: the limits still hold per process, and `onFallback` is told of every such
 * decision (the window's name).
 */
export function redisStore(
  client: Redis,
  prefix: string,
  onFallback: (window: string) => void = () => {},
): CounterStore {
  return {
    counter(spec) {
      if (spec.points <= 0) return null;
      const opts = { keyPrefix: `${prefix}:${spec.name}`, points: spec.points, duration: spec.durationS };
      return new RateLimiterRedis({
        ...opts,
        storeClient: client,
        rejectIfRedisNotReady: true,
        insuranceLimiter: new FallbackCounter(opts, () => onFallback(spec.name)),
      });
    },
  };
}

export interface BoundCounter {
  limiter: RateLimiterAbstract;
  key: string;
}

async function consumeOne(c: BoundCounter, nowMs: number): Promise<WindowState> {
  let res: RateLimiterRes;
  let exceeded = false;
  try {
    res = await c.limiter.consume(c.key);
  } catch (err) {
    if (!(err instanceof RateLimiterRes)) throw err;
    res = err;
    exceeded = true;
  }
  return {
    name: c.limiter.keyPrefix,
    limit: c.limiter.points,
    remaining: Math.max(0, res.remainingPoints),
    resetAtMs: nowMs + res.msBeforeNext,
    exceeded,
  };
}

/** The state of a window without consuming a point (a fresh window when the key has none). */
export async function peekOne(c: BoundCounter): Promise<WindowState> {
  const nowMs = Date.now();
  const res = await c.limiter.get(c.key);
  const consumed = res?.consumedPoints ?? 0;
  return {
    name: c.limiter.keyPrefix,
    limit: c.limiter.points,
    remaining: Math.max(0, c.limiter.points - consumed),
    resetAtMs: nowMs + (res ? res.msBeforeNext : c.limiter.duration * 1000),
    exceeded: consumed > c.limiter.points,
  };
}

export interface Decision {
  /** The window shown in the X-RateLimit-* headers: exceeded, else the one closest to exhaustion. */
  shown: WindowState | null;
  exceeded: WindowState | null;
}

export async function consumeAll(counters: BoundCounter[]): Promise<Decision> {
  if (!counters.length) return { shown: null, exceeded: null };
  const nowMs = Date.now();
  const states = await Promise.all(counters.map((c) => consumeOne(c, nowMs)));
  // Of the exceeded windows, the one that stays closed longest decides when to come back.
  const exceeded = states.filter((s) => s.exceeded).sort((a, b) => b.resetAtMs - a.resetAtMs)[0] ?? null;
  const closest = [...states].sort((a, b) => a.remaining - b.remaining || a.limit - b.limit)[0] ?? null;
  return { shown: exceeded ?? closest, exceeded };
}

export function rateLimitHeaders(w: WindowState): Record<string, string> {
  return {
    "X-RateLimit-Limit": String(w.limit),
    "X-RateLimit-Remaining": String(w.remaining),
    "X-RateLimit-Reset": String(Math.ceil(w.resetAtMs / 1000)),
  };
}

/** The 429 of spec 7.2 for an exceeded window, with Retry-After and the X-RateLimit-* headers. */
export function rateLimitError(w: WindowState, what: string): RateLimitError {
  const retryAfter = Math.max(1, Math.ceil((w.resetAtMs - Date.now()) / 1000));
  const reset = Math.ceil(w.resetAtMs / 1000);
  return new RateLimitError(`Too many ${what}; retry in ${retryAfter} s.`, {
    extra: { retry_after: retryAfter, limit: w.limit, remaining: 0, reset },
    headers: { ...rateLimitHeaders({ ...w, remaining: 0 }), "Retry-After": String(retryAfter) },
  });
}
