// The authentication service every protected route uses (deps.auth): built once per app from the
// services, it holds the keys, the token service and the rate-limit counters (memory or Redis).
import type { FastifyReply, FastifyRequest } from "fastify";
import { AuthenticationError } from "../errors.ts";
import { createRateLimits } from "../ratelimit/limits.ts";
import { redisState } from "../observability/dependencies.ts";
import { openRateLimitRedis, rateLimitFallbackReporter } from "../ratelimit/redis.ts";
import { rateLimitError, rateLimitHeaders } from "../ratelimit/windows.ts";
import type { Services } from "../services.ts";
import type { Caller, DependencyState } from "../types.ts";
import { type AuthDeps, type AuthOptions, DEFAULT_AUTH_OPTIONS } from "./deps.ts";
import { loadPublicKeys, loadSigningSecret } from "./keys.ts";
import { type LoginRequest, type LoginResult, login, type RefreshResult, refresh } from "./login.ts";
import { createSessionCache } from "./session-cache.ts";
import {
  authenticateBearer,
  authenticateRequest,
  endSession,
  spendUserWindows,
  type VerifiedSession,
  verifySession,
} from "./session-auth.ts";
import { createTokenService } from "./tokens.ts";

export type { AuthOptions } from "./deps.ts";
export type { LoginRequest, LoginResult, LoginUser, RefreshResult } from "./login.ts";
export type { VerifiedSession } from "./session-auth.ts";

export interface Auth {
  /**
   * Verifies the bearer token and its session, applies rate limits (headers set on `reply`), and
   * returns the Caller (the source of each call is the adapter's: src/http/protected.ts scopeOf).
   * Throws AuthenticationError (401) / RateLimitError (429).
   */
  authenticate(request: FastifyRequest, reply: FastifyReply): Promise<Caller>;
  /**
   * Token and session checks (no activity mark): the token validator. With `reply`, the call also
   * spends the user's and tenant's rate-limit windows, like any other authenticated request.
   */
  verify(
    request: FastifyRequest,
    opts?: { allowIdle?: boolean; reply?: FastifyReply },
  ): Promise<VerifiedSession>;
  /**
   * An Authorization value without an HTTP request (GraphQL over WebSocket): as authenticate, the
   * refusal spending `clientAddress`'s window; the caller and its token's expiry (epoch seconds).
   */
  authenticateBearer(
    authorization: string | undefined,
    clientAddress: string,
    requestId: string,
  ): Promise<{ caller: Caller; expiresAt: number | null }>;
  /** Login limits (per IP and username) apply first; their X-RateLimit-* headers go on `reply`. */
  login(input: LoginRequest, request: FastifyRequest, reply: FastifyReply): Promise<LoginResult>;
  /** Counts against the IP's login limit too. */
  refresh(refreshToken: string, request: FastifyRequest, reply: FastifyReply): Promise<RefreshResult>;
  /**
   * Shows the per-IP window of calls without a valid token in the X-RateLimit-* headers of an
   * answer no other window covered (health checks, unknown routes), so that every response
   * carries them. The window itself is spent by every refused token (missing, bad, expired) in
   * authenticate, verify and logout: 429 once it is exhausted.
   */
  showAnonymousWindow(request: FastifyRequest, reply: FastifyReply): Promise<void>;
  /**
   * Spends the client IP's window of calls without a token (a public page that costs work:
   * GraphiQL's): 429 once it is exhausted, its X-RateLimit-* headers on `reply` otherwise.
   */
  spendAnonymous(request: FastifyRequest, reply: FastifyReply): Promise<void>;
  /** Deletes the session of the request's token (and its refresh tokens); idle sessions too. */
  logout(request: FastifyRequest): Promise<void>;
  /** The rate limits' Redis (GET /healthz, /metrics): `embedded` when the counters are in memory. */
  dependencyState(): DependencyState;
  close(): Promise<void>;
}

export async function createAuth(services: Services, overrides: Partial<AuthOptions> = {}): Promise<Auth> {
  const { config } = services;
  const options: AuthOptions = { ...DEFAULT_AUTH_OPTIONS, login: config.loginRateLimit, ...overrides };
  const redis = await openRateLimitRedis(config.redisUrl, services.logger);
  const fallbacks = rateLimitFallbackReporter(services.logger, services.metrics.rateLimitFallbacks);
  const sessions = await createSessionCache(services.db, { ttlMs: config.sessionCacheMs });
  // Menus shape the grants a session carries: a metadata change forgets every cached session.
  const stopClearingOnMetadata = services.metadata.onChange(() => sessions.clear());
  const deps: AuthDeps = {
    db: services.db,
    clock: services.clock,
    config,
    metadata: services.metadata,
    tokens: createTokenService({
      secret: await loadSigningSecret(config),
      publicKeys: await loadPublicKeys(config),
      issuer: config.jwt.issuer,
      audience: config.jwt.audience,
      lifetimeS: config.accessTokenActiveS + config.accessTokenRenewableS,
      clock: services.clock,
    }),
    limits: createRateLimits({
      config: config.rateLimit,
      login: options.login,
      redis,
      prefix: options.rateLimitPrefix,
      onFallback: fallbacks,
    }),
    sessions,
    options,
  };
  /** A refused token spends the caller's IP window: a flood of bad tokens meets a 429. */
  async function spendingOnRefusal<T>(
    request: Pick<FastifyRequest, "clientAddress">,
    reply: FastifyReply | null,
    fn: () => Promise<T>,
  ) {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof AuthenticationError) {
        const decision = await deps.limits.anonymous(request.clientAddress);
        if (decision.exceeded) throw rateLimitError(decision.exceeded, "requests without a valid token");
        if (decision.shown && reply) reply.headers(rateLimitHeaders(decision.shown));
      }
      throw err;
    }
  }

  return {
    authenticate: (request, reply) =>
      spendingOnRefusal(request, reply, () => authenticateRequest(deps, request, reply)),
    authenticateBearer: (authorization, clientAddress, requestId) =>
      spendingOnRefusal({ clientAddress }, null, () => authenticateBearer(deps, authorization, requestId)),
    verify: (request, opts) =>
      spendingOnRefusal(request, opts?.reply ?? null, async () => {
        const verified = await verifySession(deps, request, opts);
        if (opts?.reply) await spendUserWindows(deps, verified.session, opts.reply);
        return verified;
      }),
    login: (input, request, reply) => login(deps, input, request, reply),
    refresh: (token, request, reply) => refresh(deps, token, request, reply),
    async spendAnonymous(request, reply) {
      const decision = await deps.limits.anonymous(request.ip);
      if (decision.exceeded) throw rateLimitError(decision.exceeded, "requests without a valid token");
      if (decision.shown) reply.headers(rateLimitHeaders(decision.shown));
    },
    async showAnonymousWindow(request, reply) {
      const state = await deps.limits.peekAnonymous(request.clientAddress);
      if (state) reply.headers(rateLimitHeaders(state));
    },
    logout: (request) =>
      spendingOnRefusal(request, null, async () => {
        const { session } = await verifySession(deps, request, { allowIdle: true });
        await endSession(deps, session.sessionId);
      }),
    dependencyState: () => redisState(redis, fallbacks.lastAt),
    async close() {
      stopClearingOnMetadata();
      await sessions.stop();
      if (redis) await redis.quit().catch(() => redis.disconnect());
    },
  };
}
