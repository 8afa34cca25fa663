// What the authentication flows share: the database, clock and config of the service, the token
// service, the rate limits, and the tunables of AuthOptions.
import type { MetadataRegistry } from "../metadata/registry.ts";
import type { LoginLimitConfig, RateLimits } from "../ratelimit/limits.ts";
import type { Config, Queryable } from "../types.ts";
import type { SessionCache } from "./session-cache.ts";
import type { TokenService } from "./tokens.ts";
import type { LockoutPolicy } from "./lockout.ts";

export interface AuthOptions {
  login: LoginLimitConfig;
  lockout: LockoutPolicy;
  /** LAST_ACTIVITY is written at most once per this many seconds per session. */
  touchIntervalS: number;
  /** Prefix of the rate-limit keys (Redis); tests give each app its own. */
  rateLimitPrefix: string;
}

/** The defaults; `login` comes from config.loginRateLimit. */
export const DEFAULT_AUTH_OPTIONS: Omit<AuthOptions, "login"> = {
  lockout: { maxFailures: 5, lockSeconds: 900 },
  touchIntervalS: 30,
  rateLimitPrefix: "dimensio:rl",
};

export interface AuthDeps {
  db: Queryable;
  clock: () => Date;
  config: Config;
  metadata: MetadataRegistry;
  tokens: TokenService;
  limits: RateLimits;
  /** Sessions verified lately, evicted by the database's notices. */
  sessions: SessionCache;
  options: AuthOptions;
}

/** The end of a session's idle window that starts at `from`. */
export function idleDeadline(deps: Pick<AuthDeps, "config">, from: Date): Date {
  return new Date(from.getTime() + deps.config.accessTokenRenewableS * 1000);
}
