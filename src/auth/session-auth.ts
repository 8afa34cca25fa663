// Per-request authentication: bearer token, its live session (one lookup), rate limits, grants
// refreshed from the database when they changed, activity mark, token renewal, the Caller.
import type { FastifyReply, FastifyRequest } from "fastify";
import { AuthenticationError } from "../errors.ts";
import { rateLimitError, rateLimitHeaders } from "../ratelimit/windows.ts";
import type { Caller, Grant, Principal } from "../types.ts";
import { type AuthDeps, idleDeadline } from "./deps.ts";
import { buildProfile, grantsHash } from "./profile.ts";
import { bearerOf, bearerToken } from "./request-input.ts";
import {
  deleteSession,
  findSession,
  type StoredSession,
  touchSession,
  updateSessionProfile,
} from "./sessions.ts";
import type { SessionClaims, VerifiedToken } from "./tokens.ts";

/** A verified token and its live session. */
export interface VerifiedSession {
  token: VerifiedToken;
  session: StoredSession;
}

/** The claims of an access token for a session, as it stands now. */
export function accessClaims(session: StoredSession): SessionClaims {
  const c = session.context;
  return {
    sub: session.userId,
    user_id: session.userId,
    tenant_id: session.tenantId,
    sessionId: session.sessionId,
    source: c.source,
    centro_dett: c.centro_dett,
    peso: c.peso,
    ambiente: c.ambiente,
    lingua: c.lingua,
  };
}

/** The token of the Authorization header, verified with its session (see verifyBearer). */
export function verifySession(
  deps: AuthDeps,
  request: FastifyRequest,
  opts: { allowIdle?: boolean } = {},
): Promise<VerifiedSession> {
  return verifyBearer(deps, bearerToken(request), opts);
}

/**
 * A bearer token, verified, and its session: it must exist, belong to an active user, match the
 * token's user and tenant, and (unless allowIdle) not be idle-expired. No HTTP here: the time is
 * the deps' clock; rate limits, the activity mark and token renewal are the HTTP layer's hooks.
 */
export async function verifyBearer(
  deps: AuthDeps,
  bearer: string,
  opts: { allowIdle?: boolean } = {},
): Promise<VerifiedSession> {
  const token = await deps.tokens.verifyAccess(bearer);
  const sessionId = token.claims.sessionId as string;
  const read = () => findSession(deps.db, sessionId);
  let session = await deps.sessions.get(sessionId, read);
  if (session && !opts.allowIdle && isIdle(deps, session)) {
    // Another process may have marked activity (or a refresh revived it) since it was cached.
    deps.sessions.evict(sessionId);
    session = await read();
  }
  if (!session) throw new AuthenticationError("TOKEN_INVALID", "The session of this token has ended.");
  const { claims } = token;
  const userClaim = claims.user_id ?? claims.sub;
  if (!session.userActive) {
    // A deactivated user's sessions end for good: reactivating the user must not revive them.
    await endSession(deps, session.sessionId);
    throw new AuthenticationError("TOKEN_INVALID", "The user of this token is not active.");
  }
  if (
    (userClaim !== undefined && userClaim !== session.userId) ||
    (claims.tenant_id !== undefined && claims.tenant_id !== session.tenantId)
  ) {
    throw new AuthenticationError("TOKEN_INVALID", "The token does not match its session.");
  }
  if (!opts.allowIdle && isIdle(deps, session)) {
    throw new AuthenticationError("TOKEN_EXPIRED", "The session expired after inactivity.", {
      extra: { expired_at: idleDeadline(deps, session.lastActivity).toISOString() },
    });
  }
  return { token, session };
}

function isIdle(deps: AuthDeps, session: StoredSession): boolean {
  return deps.clock().getTime() > idleDeadline(deps, session.lastActivity).getTime();
}

/**
 * Deletes a session (and its refresh tokens) and answers once every process has forgotten it:
 * this one at once, the others when the delete's notice reaches them, which each has by the time
 * its listening connection answers the probe sent behind it (SessionCache.caughtUp).
 */
export async function endSession(deps: AuthDeps, sessionId: string): Promise<void> {
  const existed = await deleteSession(deps.db, sessionId);
  deps.sessions.evict(sessionId);
  if (existed) await deps.sessions.caughtUp();
}

/**
 * Session grants (and peso) follow TB_USER_GRANT and TB_USER: when they changed since the session
 * was built, the session row is rebuilt from them; otherwise the session's own GRANTS apply.
 */
export async function syncProfile(deps: AuthDeps, session: StoredSession): Promise<Grant[]> {
  const unchanged = unchangedGrants(session);
  if (unchanged) return unchanged;
  const current = session.currentGrants;
  const peso = session.currentPeso ?? session.context.peso;
  const c = session.context;
  const { centroDett, ambiente } = currentScope(session);
  const profile = buildProfile(
    deps.metadata.current(),
    {
      userId: session.userId,
      tenantId: session.tenantId,
      peso,
      centroDett,
      ambiente,
      lingua: c.lingua,
    },
    current,
    { source: c.source, centroDett, uuid: c.uuid ?? null },
  );
  await updateSessionProfile(deps.db, session.sessionId, profile);
  session.context = profile.context;
  session.grants = current;
  return current;
}

/**
 * The session's unit and environment as TB_USER allows them now (the session's when not read): the
 * unit the session logged in to while it is still the user's own or one of TB_USER.CENTRI, else
 * the user's own.
 */
function currentScope(session: StoredSession): { centroDett: string | null; ambiente: string | null } {
  const c = session.context;
  const own = session.currentCentroDett;
  const stillAllowed =
    own === undefined ||
    c.centro_dett === own ||
    (c.centro_dett !== null && session.currentCentri?.includes(c.centro_dett));
  return {
    centroDett: stillAllowed ? c.centro_dett : own,
    ambiente: session.currentAmbiente === undefined ? c.ambiente : session.currentAmbiente,
  };
}

/**
 * The session's own grants while TB_USER_GRANT and TB_USER still match them (grants, peso, and the
 * unit and environment the row scope compares with), else null.
 */
function unchangedGrants(session: StoredSession): Grant[] | null {
  const peso = session.currentPeso ?? session.context.peso;
  const scope = currentScope(session);
  const same =
    grantsHash(session.currentGrants) === session.context.grants_hash &&
    peso === session.context.peso &&
    scope.centroDett === session.context.centro_dett &&
    scope.ambiente === session.context.ambiente;
  return same ? session.grants : null;
}

/**
 * Where an authentication's response headers go (the rate-limit windows, a renewed token): the
 * HTTP reply; null where no response carries headers (a WebSocket's messages).
 */
export interface ResponseHeaders {
  headers(values: Record<string, string>): unknown;
}

/** One request of the session's user and tenant: 429 when a window is spent, else its headers. */
export async function spendUserWindows(
  deps: AuthDeps,
  session: StoredSession,
  out: ResponseHeaders | null,
): Promise<void> {
  const decision = await deps.limits.request(session.userId, session.tenantId);
  if (decision.exceeded) throw rateLimitError(decision.exceeded, "requests");
  if (decision.shown && out) out.headers(rateLimitHeaders(decision.shown));
}

/** The caller of a verified session, with grants and peso as they stand now (no HTTP). */
export async function principalOf(deps: AuthDeps, session: StoredSession): Promise<Principal> {
  // Awaited only when the session is rebuilt: the usual request makes no promise here.
  const grants = unchangedGrants(session) ?? (await syncProfile(deps, session));
  return {
    userId: session.userId,
    tenantId: session.tenantId,
    sessionId: session.sessionId,
    peso: Number(session.context.peso),
    centroDett: session.context.centro_dett,
    ambiente: session.context.ambiente,
    lingua: session.context.lingua,
    grants,
  };
}

/**
 * LAST_ACTIVITY is written at most every touchIntervalS. Null when there is nothing to
 * write (most requests): the caller then has no promise to await.
 */
function markActivity(deps: AuthDeps, session: StoredSession): Promise<void> | null {
  const now = deps.clock();
  if (now.getTime() - session.lastActivity.getTime() < deps.options.touchIntervalS * 1000) return null;
  return touchSession(deps.db, session.sessionId, now, idleDeadline(deps, now)).then(() => {
    session.lastActivity = now;
  });
}

/**
 * A token older than ACCESS_TOKEN_ACTIVE_S gets a fresh one in X-Access-Token. Null when the token
 * is young enough (most requests).
 */
function renewToken(deps: AuthDeps, verified: VerifiedSession, out: ResponseHeaders): Promise<void> | null {
  const now = deps.clock();
  if (Math.floor(now.getTime() / 1000) - verified.token.iat <= deps.config.accessTokenActiveS) return null;
  return deps.tokens.issue(accessClaims(verified.session)).then((renewed) => {
    out.headers({ "X-Access-Token": renewed.token });
  });
}

/** An authenticated caller and when its token expires (epoch seconds; null: no expiry). */
export interface Authenticated {
  caller: Caller;
  expiresAt: number | null;
}

/**
 * The one authentication of a request, whatever carries it: the bearer token and its session
 * verified, the user's and tenant's rate-limit windows spent, the activity mark, and with a
 * response to carry it (`out`) the token's renewal. The caller only: the source and center_dett
 * of each call are the adapters' business.
 */
export async function authenticateToken(
  deps: AuthDeps,
  token: string,
  requestId: string,
  out: ResponseHeaders | null,
): Promise<Authenticated> {
  const verified = await verifyBearer(deps, token);
  await spendUserWindows(deps, verified.session, out);
  const principal = await principalOf(deps, verified.session);
  const touched = markActivity(deps, verified.session);
  if (touched) await touched;
  const renewed = out ? renewToken(deps, verified, out) : null;
  if (renewed) await renewed;
  return { caller: { principal, requestId, now: deps.clock }, expiresAt: verified.token.claims.exp ?? null };
}

/** The protected scope's preHandler (src/http/protected.ts): the request's bearer token. */
export async function authenticateRequest(
  deps: AuthDeps,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<Caller> {
  return (await authenticateToken(deps, bearerToken(request), request.id, reply)).caller;
}

/**
 * An Authorization value without HTTP (a WebSocket's connection_init, or each of its operations):
 * no renewal, there being no response header to carry it.
 */
export function authenticateBearer(
  deps: AuthDeps,
  authorization: string | undefined,
  requestId: string,
): Promise<Authenticated> {
  return authenticateToken(deps, bearerOf(authorization), requestId, null);
}
