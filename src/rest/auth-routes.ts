// Authentication endpoints of spec 4.8 / part 5: login (variants A and B), refresh, logout (both
// shapes), token validator. The logic lives in src/auth/service.ts; these adapt bodies.
import { scopeOf } from "../http/protected.ts";
import { inScope } from "../types.ts";
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import { z } from "zod";
import type { LoginRequest, LoginResult } from "../auth/service.ts";
import { ApiError, AuthenticationError, ValidationError } from "../errors.ts";
import type { RouteDeps } from "./deps.ts";

const optionalText = (max: number) =>
  z
    .string()
    .max(max)
    .nullish()
    .transform((v) => (v === undefined || v === null || v === "" ? null : v));

const credentialsSchema = z.object({
  username: z.string().min(1).max(100),
  password: z.string().min(1).max(1024),
  source: optionalText(60),
  centro_dett: optionalText(50),
});

const tokenExchangeSchema = z.object({
  access_token: z.string().min(1).max(8192),
  resource: optionalText(200),
  tenantId: optionalText(50),
  source: optionalText(60),
  centro_dett: optionalText(50),
});

const variantBSchema = z.object({
  uuid: z.string().min(1).max(200),
  resource: z.string().min(1).max(200),
  tenantId: z.string().min(1).max(50),
  username: z.string().min(1).max(100).optional(),
  password: z.string().min(1).max(1024).optional(),
  access_token: z.string().min(1).max(8192).optional(),
  source: optionalText(60),
  centro_dett: optionalText(50),
});

const refreshSchema = z.object({ refresh_token: z.string().min(1).max(200) });

function objectBody(body: unknown): Record<string, unknown> {
  if (!body || typeof body !== "object" || Array.isArray(body)) {
    throw new ValidationError("INVALID_REQUEST", "The request body must be a JSON object.");
  }
  return body as Record<string, unknown>;
}

function parse<T>(schema: z.ZodType<T>, body: Record<string, unknown>): T {
  const parsed = schema.safeParse(body);
  if (parsed.success) return parsed.data;
  const errors = parsed.error.issues.map((i) => ({
    field: i.path.join(".") || "(body)",
    message: i.message,
  }));
  const missing = parsed.error.issues.some((i) => {
    const key = i.path[0];
    return i.path.length === 1 && typeof key === "string" && body[key] === undefined;
  });
  throw new ValidationError(
    missing ? "MISSING_PARAMETER" : "INVALID_PARAMETER",
    `The login body is not valid: ${errors.map((e) => `${e.field}: ${e.message}`).join("; ")}`,
    { errors, ...(errors[0] ? { field: errors[0].field } : {}) },
  );
}

/** The token-exchange form of either variant: the source may be given as `resource`. */
function tokenExchangeRequest(
  b: {
    access_token: string;
    source?: string | null;
    resource?: string | null;
    centro_dett: string | null;
    tenantId: string | null;
  },
  uuid: string | null,
): LoginRequest {
  return {
    kind: "token",
    accessToken: b.access_token,
    source: b.source ?? b.resource ?? null,
    centroDett: b.centro_dett,
    tenantId: b.tenantId,
    uuid,
  };
}

/** Variant A bodies: the credentials form, or the token-exchange form when access_token is given. */
function variantARequest(body: Record<string, unknown>): LoginRequest {
  if (body.access_token !== undefined) return tokenExchangeRequest(parse(tokenExchangeSchema, body), null);
  const b = parse(credentialsSchema, body);
  return {
    kind: "credentials",
    username: b.username,
    password: b.password,
    source: b.source,
    centroDett: b.centro_dett,
    tenantId: null,
    uuid: null,
  };
}

function variantBRequest(body: Record<string, unknown>): LoginRequest {
  const b = parse(variantBSchema, body);
  if (b.access_token !== undefined)
    return tokenExchangeRequest({ ...b, access_token: b.access_token }, b.uuid);
  if (b.username === undefined || b.password === undefined) {
    throw new ValidationError("MISSING_PARAMETER", "username and password (or access_token) are required.", {
      field: b.username === undefined ? "username" : "password",
    });
  }
  return {
    kind: "credentials",
    username: b.username,
    password: b.password,
    source: b.source ?? b.resource,
    centroDett: b.centro_dett,
    tenantId: b.tenantId,
    uuid: b.uuid,
  };
}

function variantAResponse(r: LoginResult) {
  return {
    status: "success",
    data: {
      access_token: r.accessToken,
      refresh_token: r.refreshToken,
      token_type: "Bearer",
      expires_in: r.expiresIn,
      user: r.user,
    },
  };
}

function variantBResponse(r: LoginResult) {
  return {
    idToken: r.accessToken,
    issuedAt: r.issuedAt,
    durationTime: String(r.expiresIn),
    expiresIn: r.issuedAt + r.expiresIn,
    refreshToken: r.refreshToken,
  };
}

/** The body of a 401 from a legacy endpoint; other errors keep the standard body. */
function isUnauthorized(err: unknown): err is ApiError {
  return err instanceof ApiError && err.status === 401;
}

export const authRoutes: FastifyPluginAsync<RouteDeps> = async (app, { auth }) => {
  async function loginA(request: FastifyRequest, reply: FastifyReply) {
    const result = await auth.login(variantARequest(objectBody(request.body)), request, reply);
    return variantAResponse(result);
  }

  app.post("/auth/login", loginA);

  app.post("/api/v4/auth/login", async (request, reply) => {
    const body = objectBody(request.body);
    if (body.uuid === undefined) return loginA(request, reply);
    const input = variantBRequest(body);
    try {
      const result = await auth.login(input, request, reply);
      return variantBResponse(result);
    } catch (err) {
      if (!isUnauthorized(err)) throw err;
      return reply.status(401).send({ status: 0, message: "", data: [], errors: [] });
    }
  });

  app.post("/auth/refresh", async (request, reply) => {
    const body = objectBody(request.body);
    const parsed = refreshSchema.safeParse(body);
    if (!parsed.success) {
      throw new AuthenticationError("REFRESH_TOKEN_INVALID", "A refresh_token is required. Log in again.", {
        field: "refresh_token",
      });
    }
    const result = await auth.refresh(parsed.data.refresh_token, request, reply);
    return {
      status: "success",
      data: {
        access_token: result.accessToken,
        refresh_token: result.refreshToken,
        token_type: "Bearer",
        expires_in: result.expiresIn,
      },
    };
  });

  // Who the token belongs to, as every protected route sees it (the RequestContext).
  app.get("/auth/me", async (request, reply) => {
    const caller = await auth.authenticate(request, reply);
    const scope = scopeOf(request);
    const ctx = inScope(caller, scope.source, scope.centerDett);
    const p = ctx.principal;
    return {
      data: {
        user_id: p.userId,
        tenant_id: p.tenantId,
        session_id: p.sessionId,
        // A string, as in the token and the login's user block (spec 2.6, docs/decisions.md).
        peso: String(p.peso),
        centro_dett: p.centroDett,
        ambiente: p.ambiente,
        lingua: p.lingua,
        grants: p.grants,
        source: ctx.source,
        center_dett: ctx.centerDett,
      },
    };
  });

  app.post("/auth/logout", async (request) => {
    await auth.logout(request);
    return { status: "success", message: "Logged out; the session is closed." };
  });

  app.get("/api/v4/auth/logout", async (request, reply) => {
    try {
      await auth.logout(request);
      return { status_code: 200, message: "Logged out" };
    } catch (err) {
      if (!isUnauthorized(err)) throw err;
      return reply.status(401).send({ ...err.toBody(), status_code: 401 });
    }
  });

  app.get("/api/v4/auth/tokenvalidator", async (request, reply) => {
    try {
      await auth.verify(request, { reply });
      return { code: 200, message: "Token is Valid" };
    } catch (err) {
      if (!isUnauthorized(err)) throw err;
      const text = err.message ? `Token is invalid: ${err.message}` : "Token is invalid";
      return reply.status(401).send({
        code: 401,
        msg: text,
        status: 401,
        message: text,
        error: "AuthenticationError",
        reason: err.code,
        ...(err.extra ?? {}),
      });
    }
  });
};
