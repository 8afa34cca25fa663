// ROLE=gateway (decisions.md §9): the one public entry in front of separate backends. Routes each
// request (src/gateway/routing.ts; a GraphQL POST running a query goes to read: its JSON body, up
// to the backends' bound for it, is read for that first, then forwarded as received), streams
// bodies both ways with @fastify/reply-from over undici (uploads and downloads are never
// buffered), keeps X-Request-ID end to end, adds the gateway's secret, answers 502
// BACKEND_UNAVAILABLE and 504 BACKEND_TIMEOUT in the standard body (an import, or a metadata write
// that may build indexes, waits as long as the write backend may take for it: routing.ts
// backendTimeoutMs), and enforces rate limits itself (per token, or per client IP without one),
// shared through Redis by every gateway when REDIS_URL is set. GraphQL over WebSocket is proxied
// byte for byte (websocket.ts).
import { createHash } from "node:crypto";
import { Readable } from "node:stream";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { ApiError } from "../errors.ts";
import { buildHttpServer } from "../http/server.ts";
import type { Logger } from "../logger.ts";
import { createDependencyHealth, type DependencyProbe, redisState } from "../observability/dependencies.ts";
import { createMetrics, serveMetrics } from "../observability/metrics.ts";
import { traceRequests } from "../observability/tracing.ts";
import { createRateLimits } from "../ratelimit/limits.ts";
import { openRateLimitRedis, rateLimitFallbackReporter } from "../ratelimit/redis.ts";
import { rateLimitError, rateLimitHeaders } from "../ratelimit/windows.ts";
import type { Config } from "../types.ts";
import { createGraphQLReads, type GraphQLReads } from "./graphql-operation.ts";
import { backendTimeoutMs, chooseBackend, isGraphQLPath } from "./routing.ts";
import { GATEWAY_SECRET_HEADER } from "./secret.ts";
import { proxyGraphQLWebSockets } from "./websocket.ts";

const BEARER = /^Bearer\s+(\S+)$/i;
/** Login and refresh have their own limits at the auth backend. */
const LOGIN_PATHS = /^\/(api\/v\d+\/)?auth\/(login|refresh)(\/|$|\?)/;

/** The body's first bytes, up to `limit` and one more: all of it when `complete`. */
async function readUpTo(body: Readable, limit: number): Promise<{ chunks: Buffer[]; complete: boolean }> {
  const chunks: Buffer[] = [];
  let bytes = 0;
  // Left at the bound without destroying the body: the rest is streamed on after what was read.
  for await (const chunk of body.iterator({ destroyOnReturn: false })) {
    chunks.push(chunk as Buffer);
    bytes += (chunk as Buffer).length;
    if (bytes > limit) return { chunks, complete: false };
  }
  return { chunks, complete: true };
}

/** The chunks read, then the rest of the body: the same bytes, streamed on. */
function rejoined(chunks: Buffer[], rest: Readable): Readable {
  return Readable.from(
    (async function* () {
      yield* chunks;
      yield* rest;
    })(),
    { objectMode: false },
  );
}

/**
 * Whether a POST to a GraphQL path only reads (graphql-operation.ts). Its body is read for that
 * when it is JSON, uncompressed, and within the backends' bound for a GraphQL body
 * (min(GRAPHQL_MAX_BODY_BYTES, BODY_LIMIT_BYTES): they refuse a larger one with 413, unread); the
 * bytes read are put back as the request's body, so that what is forwarded is what was received.
 * Any other body is forwarded unread (to write).
 */
async function graphqlPostReads(
  request: FastifyRequest,
  reads: GraphQLReads,
  limit: number,
): Promise<boolean> {
  const type = (request.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase();
  const encoding = request.headers["content-encoding"]?.trim().toLowerCase();
  const declared = Number(request.headers["content-length"] ?? 0);
  const body = request.body;
  if (type !== "application/json" || (encoding && encoding !== "identity") || declared > limit) return false;
  if (!(body instanceof Readable)) return false;
  let read: { chunks: Buffer[]; complete: boolean };
  try {
    read = await readUpTo(body, limit);
  } catch {
    // The client went away mid-body: forwarded as it is, as any other body.
    return false;
  }
  request.body = rejoined(read.chunks, body);
  return read.complete && reads.isQuery(Buffer.concat(read.chunks));
}

export async function buildGateway(config: Config, logger: Logger): Promise<FastifyInstance> {
  const secret = config.gateway.secret!;
  const graphqlReads = createGraphQLReads({
    maxDocumentBytes: config.graphql.maxDocumentBytes,
    trustedDocuments: config.graphql.persisted.trustedDocuments,
  });
  const graphqlBodyLimit = Math.min(config.graphql.maxBodyBytes, config.bodyLimitBytes);
  const metrics = createMetrics({ db: null, role: "gateway" });
  // The gateway's one dependency: the Redis of its rate limits (/healthz, dimensio_dependency_up).
  const probes: Record<string, DependencyProbe> = {};
  const app = await buildHttpServer({
    config,
    logger,
    readiness: async () => ({ gateway: "ok" }),
    dependencies: createDependencyHealth(probes, metrics.registry).states,
  });
  const redis = await openRateLimitRedis(config.redisUrl, logger);
  const fallbacks = rateLimitFallbackReporter(logger, metrics.rateLimitFallbacks);
  probes.redis = () => redisState(redis, fallbacks.lastAt);
  const limits = createRateLimits({
    config: { ...config.rateLimit, tenantPerMinute: 0, tenantPerHour: 0 },
    login: { perIpPerMinute: 0, perUsernamePerMinute: 0 },
    redis,
    prefix: "dimensio:gw",
    onFallback: fallbacks,
  });
  app.addHook("onClose", async () => {
    redis?.disconnect();
  });

  // Bodies pass through untouched: no parser reads them.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", (_request, payload, done) => done(null, payload));
  // Imported here: the bundle `npm start` runs would otherwise load the proxy (undici) in every role.
  const { default: replyFrom } = await import("@fastify/reply-from");
  await app.register(replyFrom, {
    undici: { connections: 128, pipelining: 1, keepAliveTimeout: 60_000 },
    disableRequestLogging: true,
  });

  traceRequests(app, "gateway");
  serveMetrics(app, metrics, (request) => String(request.backend ?? "none"), {
    gatewaySecret: config.gateway.secret,
    token: config.metricsToken,
  });

  /** The gateway's rate limits of a request: its 429 thrown, else the headers to show. */
  const admit = async (url: string, authorization: string | undefined, ip: string) => {
    if (LOGIN_PATHS.test(url)) return {};
    const token = BEARER.exec(authorization ?? "")?.[1];
    const decision = token
      ? await limits.request(createHash("sha256").update(token).digest("hex"), "-")
      : await limits.anonymous(ip);
    if (decision.exceeded)
      throw rateLimitError(
        decision.exceeded,
        token ? "requests with this token" : "requests without a token",
      );
    return decision.shown ? rateLimitHeaders(decision.shown) : {};
  };

  // GraphQL over WebSocket: upgrades on the GraphQL paths proxied to the write backend.
  proxyGraphQLWebSockets({ app, config, secret, admit });

  app.decorateRequest("backend", null);
  // OPTIONS is CORS's (answered here); everything else goes to a backend.
  app.route({
    method: ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"],
    url: "/*",
    handler: async (request, reply) => {
      let target = chooseBackend(config, request.method, request.url, request.headers);
      request.backend = target.name;
      reply.headers(await admit(request.url, request.headers.authorization, request.ip));
      // A GraphQL query sent by POST goes where a GET goes (its body read once admitted).
      const reads =
        (target.name === "write" || target.name === "canary-write") &&
        request.method === "POST" &&
        isGraphQLPath(request.url) &&
        (await graphqlPostReads(request, graphqlReads, graphqlBodyLimit));
      if (reads) {
        target = chooseBackend(config, request.method, request.url, request.headers, true);
        request.backend = target.name;
      }
      return reply.from(`${target.url.replace(/\/$/, "")}${request.url}`, {
        timeout: backendTimeoutMs(config, request.method, request.url),
        // `expect` is Node's business here: its server answered the client's `Expect: 100-continue`
        // (curl sends it with a body over 1 MB) with 100 Continue already, and undici refuses the
        // header (NotSupportedError): the body is forwarded without it.
        rewriteRequestHeaders: (_req, { expect: _expect, ...headers }) => ({
          ...headers,
          [GATEWAY_SECRET_HEADER]: secret,
          "x-request-id": request.id,
          "x-forwarded-for": request.ip,
        }),
        rewriteHeaders: (headers) => ({ ...headers, "x-request-id": request.id }),
        onError: (errorReply, { error }) => {
          const timedOut = (error as { statusCode?: number }).statusCode === 504;
          request.log.warn({ err: error, backend: target.name }, "backend call failed");
          const err = timedOut
            ? new ApiError(
                504,
                "BACKEND_TIMEOUT",
                "GatewayTimeout",
                `The ${target.name} backend did not answer in time.${
                  reads || request.method === "GET" || request.method === "HEAD"
                    ? ""
                    : " The request may still complete there: check before sending it again."
                }`,
              )
            : new ApiError(
                502,
                "BACKEND_UNAVAILABLE",
                "BadGateway",
                `The ${target.name} backend is unavailable.`,
              );
          errorReply.status(err.status).header("x-request-id", request.id).send(err.toBody());
        },
      });
    },
  });
  return app;
}

declare module "fastify" {
  interface FastifyRequest {
    /** The backend the gateway chose (metrics, logs). */
    backend: string | null;
  }
}
