// The Redis client behind shared rate-limit counters (REDIS_URL), for the API's auth service and
// the gateway alike. An unreachable Redis is logged, not fatal: the limits fall back to memory
// meanwhile (windows.ts: redisStore). It resolves once Redis is ready (or after `readyWithinMs`
// with the fallback), so the first requests are counted where every other process sees them.
//
// Redis faults (issue 18): commands are not queued while the connection is down (they fail at
// once and the counter falls back to memory), and a command Redis does not answer within
// `commandTimeoutMs` fails too, so a request never waits on a Redis that hangs.
import type { Redis } from "ioredis";
import type { Logger } from "../logger.ts";

/** How long a rate-limit command may wait for Redis before the counter falls back to memory. */
export const REDIS_COMMAND_TIMEOUT_MS = 500;

export async function openRateLimitRedis(
  url: string | null,
  logger: Logger,
  readyWithinMs = 2000,
  commandTimeoutMs = REDIS_COMMAND_TIMEOUT_MS,
): Promise<Redis | null> {
  if (!url) return null;
  // Loaded only when REDIS_URL is set.
  const { Redis } = await import("ioredis");
  const redis = new Redis(url, {
    maxRetriesPerRequest: 1,
    enableOfflineQueue: false,
    commandTimeout: commandTimeoutMs,
    connectTimeout: 2000,
  });
  // One line per outage, not one per reconnection attempt.
  let down = false;
  redis.on("error", (err) => {
    if (down) return;
    down = true;
    logger.warn({ err: err.message }, "redis error (rate limits): counting in memory until it is back");
  });
  redis.on("ready", () => {
    if (down) logger.info("redis is back (rate limits): counting in Redis again");
    down = false;
  });
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, readyWithinMs);
    redis.once("ready", () => {
      clearTimeout(timer);
      resolve();
    });
  });
  return redis;
}

/** A rate-limit fallback reporter, which also tells when Redis last failed to answer. */
export interface FallbackReporter {
  (window: string): void;
  /** Date.now() of the latest decision made in memory (0: none yet). */
  lastAt(): number;
}

/**
 * What a process does on each rate-limit decision made in memory because Redis did not answer:
 * counts it (dimensio_rate_limit_fallbacks_total, by window) and logs a line at most once a minute.
 */
export function rateLimitFallbackReporter(
  logger: Logger,
  counter: { inc(labels: { window: string }): void },
  everyMs = 60_000,
): FallbackReporter {
  let lastLogged = 0;
  let last = 0;
  const report = (window: string) => {
    counter.inc({ window });
    const now = Date.now();
    last = now;
    if (now - lastLogged < everyMs) return;
    lastLogged = now;
    logger.warn(
      { window },
      "rate limits: Redis did not answer; this process counts in memory (limits hold per process)",
    );
  };
  return Object.assign(report, { lastAt: () => last });
}
