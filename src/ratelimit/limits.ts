// The service's rate limits: per user and per tenant on every authenticated request (spec 8,
// config.rateLimit), and per IP and per username on login attempts.
import type { Redis } from "ioredis";
import type { RateLimitConfig } from "../types.ts";
import {
  type BoundCounter,
  type CounterStore,
  consumeAll,
  type Decision,
  memoryStore,
  peekOne,
  redisStore,
  type WindowSpec,
  type WindowState,
} from "./windows.ts";

export interface LoginLimitConfig {
  perIpPerMinute: number;
  perUsernamePerMinute: number;
}

export interface RateLimits {
  /** Consumes one request of a user (and of the user's tenant). */
  request(userId: string, tenantId: string): Promise<Decision>;
  /** Consumes one login attempt from an IP, for a username. */
  login(ip: string, username: string | null): Promise<Decision>;
  /** Consumes one request without a user (no or bad token) from an IP. */
  anonymous(ip: string): Promise<Decision>;
  /** The IP's anonymous window as it stands, for the headers of answers no other window covered. */
  peekAnonymous(ip: string): Promise<WindowState | null>;
}

function windows(store: CounterStore, specs: WindowSpec[]) {
  return specs.flatMap((spec) => {
    const limiter = store.counter(spec);
    return limiter ? [limiter] : [];
  });
}

export function createRateLimits(opts: {
  config: RateLimitConfig;
  login: LoginLimitConfig;
  redis: Redis | null;
  prefix?: string;
  /** Told of each window decided in memory because Redis did not answer (see redisStore). */
  onFallback?: (window: string) => void;
}): RateLimits {
  const prefix = opts.prefix ?? "dimensio:rl";
  const store = opts.redis ? redisStore(opts.redis, prefix, opts.onFallback) : memoryStore(prefix);
  const c = opts.config;
  const user = windows(store, [
    { name: "user:s", points: c.userPerSecond, durationS: 1 },
    { name: "user:min", points: c.userPerMinute, durationS: 60 },
    { name: "user:h", points: c.userPerHour, durationS: 3600 },
  ]);
  const tenant = windows(store, [
    { name: "tenant:min", points: c.tenantPerMinute, durationS: 60 },
    { name: "tenant:h", points: c.tenantPerHour, durationS: 3600 },
  ]);
  const ip = windows(store, [{ name: "login-ip:min", points: opts.login.perIpPerMinute, durationS: 60 }]);
  const anonymous = windows(store, [
    { name: "anonymous-ip:min", points: c.anonymousPerMinute, durationS: 60 },
  ]);
  const username = windows(store, [
    { name: "login-user:min", points: opts.login.perUsernamePerMinute, durationS: 60 },
  ]);
  return {
    request(userId, tenantId) {
      const counters: BoundCounter[] = [
        ...user.map((limiter) => ({ limiter, key: userId })),
        ...tenant.map((limiter) => ({ limiter, key: tenantId })),
      ];
      return consumeAll(counters);
    },
    anonymous(address) {
      return consumeAll(anonymous.map((limiter) => ({ limiter, key: address })));
    },
    async peekAnonymous(address) {
      const limiter = anonymous[0];
      return limiter ? peekOne({ limiter, key: address }) : null;
    },
    login(address, name) {
      const counters: BoundCounter[] = [
        ...ip.map((limiter) => ({ limiter, key: address })),
        ...(name === null ? [] : username.map((limiter) => ({ limiter, key: name.toLowerCase() }))),
      ];
      return consumeAll(counters);
    },
  };
}
