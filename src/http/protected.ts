// The protected scope: every route registered inside it has its caller authenticated once, by a
// preHandler, before its handler runs (token, session, rate limits, activity mark, renewal). Public
// routes (login, refresh, health) are registered outside it; a route inside may opt out for some
// requests with `config.public` (GraphiQL's page on GET /graphql, public media), which then spend
// the client's anonymous rate-limit window instead.
import { Readable } from "node:stream";
import { errorCodes, type FastifyInstance, type FastifyPluginAsync, type FastifyRequest } from "fastify";
import type { Auth } from "../auth/service.ts";
import { type HeavyRequests, httpLaneClient } from "./heavy-requests.ts";
import { ApiError, BadRequestError } from "../errors.ts";
import { type Caller, inScope, type RequestContext } from "../types.ts";

declare module "fastify" {
  interface FastifyRequest {
    /** The authenticated caller; set by the protected scope's preHandler. */
    caller: Caller | null;
  }
  interface FastifyContextConfig {
    /** The request needs no caller (true, or true for the requests the function accepts). */
    public?: boolean | ((request: FastifyRequest) => boolean);
    /**
     * The route reads its body itself and takes its tenant's heavy lane when it needs it (an
     * import: once its body is in a file), so a large body does not take the lane here.
     */
    ownsBodyLane?: boolean;
  }
}

/** The caller of a request in the protected scope (a route outside it asking is a bug). */
export function callerOf(request: FastifyRequest): Caller {
  if (!request.caller)
    throw new Error(`${request.method} ${request.url}: no caller (route outside the protected scope?)`);
  return request.caller;
}

/**
 * A REST call's context: the caller, with the scope REST gives in the query string (or the JSON
 * body): `source` and `center_dett`.
 */
export function contextOf(request: FastifyRequest): RequestContext {
  const scope = scopeOf(request);
  return inScope(callerOf(request), scope.source, scope.centerDett);
}

/** `source` and `center_dett` as REST gives them: the query string, else the JSON body. */
export function scopeOf(request: FastifyRequest): { source: string | null; centerDett: string | null } {
  return { source: contextParam(request, "source"), centerDett: contextParam(request, "center_dett") };
}

function stringParam(value: unknown, name: string): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== "string") {
    throw new BadRequestError("INVALID_PARAMETER", `The parameter ${name} must be given once, as a string.`, {
      field: name,
    });
  }
  return value === "" ? null : value;
}

/** A context parameter from the query string, else from a JSON object body. */
function contextParam(request: FastifyRequest, queryName: string, bodyName = queryName): string | null {
  const query = (request.query ?? {}) as Record<string, unknown>;
  const fromQuery = stringParam(query[queryName], queryName);
  if (fromQuery !== null) return fromQuery;
  const body = request.body;
  if (body && typeof body === "object" && !Array.isArray(body)) {
    return stringParam((body as Record<string, unknown>)[bodyName], bodyName);
  }
  return null;
}

/**
 * Whether `request`'s body is large enough to be read in its tenant's lane: `bodyBytes` or more
 * announced, or a length not announced; a body that is streamed, not parsed whole (multipart
 * uploads, bounded on their own), never is.
 */
export function isLargeBody(request: FastifyRequest, bodyBytes: number): boolean {
  if (bodyBytes <= 0) return false;
  const type = request.headers["content-type"] ?? "";
  if (type.toLowerCase().startsWith("multipart/")) return false;
  const length = request.headers["content-length"];
  if (length !== undefined) return Number(length) >= bodyBytes;
  return request.headers["transfer-encoding"] !== undefined;
}

/**
 * The bytes of a request's body, received whole, at most `limit` of them (the route's body limit):
 * one more and the rest is not kept (413, as Fastify answers). A body cut short (the client went
 * away, or REQUEST_TIMEOUT_MS ended it) rejects.
 */
export function receiveBody(
  payload: Readable,
  limit: number,
  reserve: (bytes: number) => boolean = () => true,
): Promise<Buffer[]> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let received = 0;
    const stop = (err: Error | null) => {
      payload.off("data", onData);
      payload.off("end", onEnd);
      payload.off("error", onError);
      payload.off("close", onClose);
      if (err) reject(err);
      else resolve(chunks);
    };
    const onData = (chunk: Buffer) => {
      received += chunk.length;
      if (received > limit) return stop(new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE());
      if (!reserve(chunk.length)) return stop(tenantBodiesFull());
      chunks.push(chunk);
    };
    const onEnd = () => stop(null);
    const onError = (err: Error & { statusCode?: number }) => {
      // As Fastify's own reader: the request's fault, never a 500.
      if (!(typeof err.statusCode === "number" && err.statusCode >= 400)) err.statusCode = 400;
      stop(err);
    };
    const onClose = () => stop(new BadRequestError("INVALID_BODY", "The request body did not arrive whole."));
    payload.on("data", onData);
    payload.on("end", onEnd);
    payload.on("error", onError);
    payload.on("close", onClose);
  });
}

/** 503: the tenant's large bodies held at once (arriving or waiting) reached TENANT_BODY_BUFFER_BYTES. */
function tenantBodiesFull(): ApiError {
  return new ApiError(
    503,
    "TENANT_BODIES_FULL",
    "ServiceUnavailable",
    "Your tenant's large request bodies held at once reached their bound (TENANT_BODY_BUFFER_BYTES): retry once the ones under way are answered.",
    { headers: { "retry-after": "5" } },
  );
}

export function protectedScope(
  auth: Auth,
  register: (scope: FastifyInstance) => Promise<void>,
  heavyBodies?: { heavy: HeavyRequests; bodyBytes: number; bufferBytes: number },
): FastifyPluginAsync {
  return async (scope) => {
    /** Bytes of large bodies each tenant holds (received, not yet answered). */
    const held = new Map<string, number>();
    scope.decorateRequest("caller", null);
    const isPublic = (request: FastifyRequest) => {
      const open = request.routeOptions.config.public;
      return open === true || (typeof open === "function" && open(request));
    };
    if (heavyBodies) {
      // A large body is parsed (JSON.parse of megabytes holds the event loop) only in its tenant's
      // lane: one tenant's large bodies take turns, the others' requests go on meanwhile (issue 35
      // §3–§4). Its caller is authenticated first, before a byte of the body is read; the body is
      // then received whole, outside the lane, and only its parsing waits for a turn: receiving
      // bytes uses neither the event loop nor the database, so a body sent slowly holds no turn
      // (exploratory test "security", finding 2; an import's body goes to a file the same way).
      // What is kept of a body meanwhile is at most its route's body limit; how many bodies one
      // user has in flight is bounded by the rate limits each request spends and by
      // REQUEST_TIMEOUT_MS, within which a body must arrive.
      // A callback hook: the usual request (no large body) passes without a promise made.
      scope.addHook("preParsing", (request, reply, payload, done) => {
        if (
          !isLargeBody(request, heavyBodies.bodyBytes) ||
          isPublic(request) ||
          request.routeOptions.config.ownsBodyLane === true
        )
          return done(null, payload);
        auth
          .authenticate(request, reply)
          .then(async (caller) => {
            request.caller = caller;
            // Announced past the route's limit: Fastify refuses it (413) without reading a byte.
            if (Number(request.headers["content-length"]) > request.routeOptions.bodyLimit) return payload;
            // Held until the answer: what a tenant's bodies keep in memory at once is bounded, so
            // that many slow bodies of one tenant cannot fill the process's memory.
            const tenant = caller.principal.tenantId;
            let mine = 0;
            reply.raw.once("close", () => {
              const left = (held.get(tenant) ?? 0) - mine;
              if (left > 0) held.set(tenant, left);
              else held.delete(tenant);
            });
            const chunks = await receiveBody(payload, request.routeOptions.bodyLimit, (bytes) => {
              const now = (held.get(tenant) ?? 0) + bytes;
              if (now > heavyBodies.bufferBytes) return false;
              held.set(tenant, now);
              mine += bytes;
              return true;
            });
            const leave = await heavyBodies.heavy.enter(
              caller.principal.tenantId,
              Number.POSITIVE_INFINITY,
              httpLaneClient(reply.raw),
            );
            // A client gone since its turn came (no close event to come) gives it back at once.
            if (reply.raw.closed) leave();
            else reply.raw.once("close", leave);
            // Fastify's parser reads these bytes as it would have read the socket's (its own
            // checks of the length and the limit included).
            return Readable.from(chunks, { objectMode: false });
          })
          .then(
            (body) => done(null, body),
            (err: Error) => done(err),
          );
      });
    }
    scope.addHook("preHandler", async (request, reply) => {
      if (request.caller) return;
      // A request without a caller spends its client's anonymous window, as a refused token does
      // (GraphiQL's page, public media): nothing in the scope is served without a window spent.
      if (isPublic(request)) return auth.spendAnonymous(request, reply);
      request.caller = await auth.authenticate(request, reply);
    });
    await register(scope);
  };
}
