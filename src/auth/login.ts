// Login (credentials or token exchange) and refresh: the three phases of spec 5.2 end in one
// TB_ANAG_SESSIONS00 row, an access token naming it, and a refresh token.
import type { FastifyReply, FastifyRequest } from "fastify";
import { AuthenticationError, PermissionDeniedError, ValidationError } from "../errors.ts";
import { storableText } from "../metadata/data-types.ts";
import { rateLimitError, rateLimitHeaders } from "../ratelimit/windows.ts";
import type { Access, Grant, MetadataModel } from "../types.ts";
import { REQUIREMENTS, viewFor } from "./access-view.ts";
import { type AuthDeps, idleDeadline } from "./deps.ts";
import { clientKey } from "./lockout.ts";
import { buildProfile, loadUserGrants } from "./profile.ts";
import { consumeRefreshToken, issueRefreshToken } from "./refresh-tokens.ts";
import { accessClaims, endSession, syncProfile } from "./session-auth.ts";
import { findSession, insertSession, purgeDeadSessions, touchSession } from "./sessions.ts";
import { checkCredentials, findUser, type UserRecord } from "./users.ts";

/** The user block of a login response (spec 5.3). */
export interface LoginUser {
  user_id: string;
  tenant_id: string;
  source: string | null;
  centro_dett: string | null;
  peso: string;
  grants: Grant[];
}

export interface LoginResult {
  accessToken: string;
  refreshToken: string;
  /** Seconds the access token stays active (ACCESS_TOKEN_ACTIVE_S). */
  expiresIn: number;
  issuedAt: number;
  user: LoginUser;
}

interface LoginContext {
  source: string | null;
  centroDett: string | null;
  /** Variants B and token exchange: the user must belong to this tenant. */
  tenantId: string | null;
  /** Variant B: the device id, kept in the session context. */
  uuid: string | null;
}

export type LoginRequest =
  | ({ kind: "credentials"; username: string; password: string } & LoginContext)
  | ({ kind: "token"; accessToken: string } & LoginContext);

export interface RefreshResult {
  accessToken: string;
  refreshToken: string;
  expiresIn: number;
}

const badCredentials = () => new AuthenticationError("INVALID_CREDENTIALS", "Invalid username or password.");

async function consumeLogin(
  deps: AuthDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  username: string | null,
) {
  const decision = await deps.limits.login(request.clientAddress, username);
  if (decision.exceeded) throw rateLimitError(decision.exceeded, "login attempts");
  if (decision.shown) reply.headers(rateLimitHeaders(decision.shown));
}

/**
 * A login may name only the user's own unit (spec decisions.md §17), or one TB_USER.CENTRI lists:
 * its `centro_dett` becomes the session's scope value ({centro_dett} in templates, the row scope),
 * so another unit is 403, not a value that silently replaces the user's. Naming none takes the
 * user's own.
 */
function checkOwnCentroDett(user: UserRecord, asked: string | null): void {
  if (asked === null || asked === user.centroDett || user.centri.includes(asked)) return;
  if (!storableText(asked))
    throw new ValidationError("INVALID_FIELD_VALUE", "centro_dett is not text a unit can be named with.", {
      field: "centro_dett",
    });
  throw new PermissionDeniedError(
    `centro_dett ${JSON.stringify(asked)} is not this user's unit; log in with the user's own (or none).`,
    { field: "centro_dett", details: { reason: "centro_dett_not_own", centro_dett: asked } },
  );
}

/**
 * A login's source is the security area (TB_MENU) its session's context names: spec 4.1 gives a
 * source as a TB_MENU code, and the profiling phase of spec 5.2 sets the context from TB_MENU.
 * One the user could go through in no request (no such node, no grant covering it, no operation
 * on it) is refused as such a request is, by the same decision (AccessView: 403
 * INSUFFICIENT_PERMISSIONS, `details.reason` unknown_source, no_grant_covers_source…). Checked
 * after the credentials (the menu's codes are told to no one who has not logged in) and before a
 * session exists; before, any text went into the session, the token and `modulo`. Naming none is
 * allowed (each request names its own).
 */
function checkLoginSource(
  model: MetadataModel,
  user: UserRecord,
  grants: Grant[],
  source: string | null,
): void {
  if (source === null) return;
  if (!storableText(source))
    throw new ValidationError(
      "INVALID_FIELD_VALUE",
      "source is not text a security area can be named with.",
      {
        field: "source",
      },
    );
  const view = viewFor(model, { grants, peso: Number(user.peso), centerDett: null, source });
  if ((Object.keys(REQUIREMENTS) as Access[]).some((access) => view.may(null, access))) return;
  // The refusal a read through it gets (the source layer's reason, else the missing operation).
  const decision = view.decide(null, "read");
  if ("refusal" in decision) throw decision.refusal();
}

/** Token exchange: an RS256 token of JWT_PUBLIC_KEYS whose sub (or user_id) names an active user. */
async function userOfExternalToken(deps: AuthDeps, accessToken: string, tenantId: string | null) {
  const { claims } = await deps.tokens.verifyExternal(accessToken);
  const userId = typeof claims.sub === "string" ? claims.sub : claims.user_id;
  const claimedTenant = typeof claims.tenant_id === "string" ? claims.tenant_id : null;
  const user = typeof userId === "string" ? await findUser(deps.db, userId) : null;
  if (!user?.active) return null;
  if (claimedTenant !== null && claimedTenant !== user.tenantId) return null;
  if (tenantId !== null && tenantId !== user.tenantId) return null;
  return user;
}

async function openSession(deps: AuthDeps, user: UserRecord, input: LoginContext): Promise<LoginResult> {
  checkOwnCentroDett(user, input.centroDett);
  const now = deps.clock();
  const grants = await loadUserGrants(deps.db, user.userId);
  const model = deps.metadata.current();
  checkLoginSource(model, user, grants, input.source);
  const profile = buildProfile(model, user, grants, {
    source: input.source,
    centroDett: input.centroDett,
    uuid: input.uuid,
  });
  await purgeDeadSessions(deps.db, user.userId, now);
  const sessionId = await insertSession(deps.db, {
    userId: user.userId,
    tenantId: user.tenantId,
    profile,
    now,
    expiresAt: idleDeadline(deps, now),
  });
  const refreshToken = await issueRefreshToken(deps.db, {
    sessionId,
    userId: user.userId,
    now,
    ttlS: deps.config.refreshTokenTtlS,
  });
  const issued = await deps.tokens.issue({
    sub: user.userId,
    user_id: user.userId,
    tenant_id: user.tenantId,
    sessionId,
    source: profile.context.source,
    centro_dett: profile.context.centro_dett,
    peso: user.peso,
    ambiente: user.ambiente,
    lingua: user.lingua,
  });
  return {
    accessToken: issued.token,
    refreshToken,
    expiresIn: deps.config.accessTokenActiveS,
    issuedAt: issued.iat,
    user: {
      user_id: user.userId,
      tenant_id: user.tenantId,
      source: profile.context.source,
      centro_dett: profile.context.centro_dett,
      peso: user.peso,
      grants,
    },
  };
}

export async function login(
  deps: AuthDeps,
  input: LoginRequest,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<LoginResult> {
  await consumeLogin(deps, request, reply, input.kind === "credentials" ? input.username : null);
  let user: UserRecord | null;
  if (input.kind === "credentials") {
    user = await checkCredentials(
      deps.db,
      input.username,
      input.password,
      deps.clock(),
      deps.options.lockout,
      clientKey(request.clientAddress),
    );
    if (user && input.tenantId !== null && user.tenantId !== input.tenantId) user = null;
  } else {
    user = await userOfExternalToken(deps, input.accessToken, input.tenantId);
  }
  if (!user) throw badCredentials();
  return openSession(deps, user, input);
}

/** Rotates a refresh token: the old one is spent, the session revived, new tokens issued. */
export async function refresh(
  deps: AuthDeps,
  refreshToken: string,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<RefreshResult> {
  await consumeLogin(deps, request, reply, null);
  const now = deps.clock();
  const { sessionId } = await consumeRefreshToken(deps.db, refreshToken, now, (id) => endSession(deps, id));
  const session = await findSession(deps.db, sessionId);
  if (!session?.userActive) {
    if (session) await endSession(deps, sessionId);
    throw new AuthenticationError("REFRESH_TOKEN_INVALID", "The session has ended. Log in again.");
  }
  await syncProfile(deps, session);
  await touchSession(deps.db, sessionId, now, idleDeadline(deps, now));
  deps.sessions.evict(sessionId);
  const next = await issueRefreshToken(deps.db, {
    sessionId,
    userId: session.userId,
    now,
    ttlS: deps.config.refreshTokenTtlS,
  });
  const issued = await deps.tokens.issue(accessClaims(session));
  return { accessToken: issued.token, refreshToken: next, expiresIn: deps.config.accessTokenActiveS };
}
