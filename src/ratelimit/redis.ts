// The Redis client behind shared rate-limit counters (REDIS_URL), for the API's auth service and
// the gateway alike. An unreachable Redis is logged, not fatal: the limits fall back to memory
// meanwhile. It resolves once Redis is ready (or after `readyWithinMs` with the fallback), so the
// first requests are counted where every other process sees them.
import type { Redis } from "ioredis";
import type { Logger } from "../logger.ts";

export async function openRateLimitRedis(
  url: string | null,
  logger: Logger,
  readyWithinMs = 2000,
): Promise<Redis | null> {
  if (!url) return null;
  // Loaded only when REDIS_URL is set.
  const { Redis } = await import("ioredis");
  const redis = new Redis(url, { maxRetriesPerRequest: 1, enableOfflineQueue: false });
  redis.on("error", (err) => logger.warn({ err: err.message }, "redis error (rate limits)"));
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, readyWithinMs);
    redis.once("ready", () => {
      clearTimeout(timer);
      resolve();
    });
  });
  return redis;
}
