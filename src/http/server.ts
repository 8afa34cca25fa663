// The Fastify instance every role shares: request ids, logging, CORS, error bodies, health.
// Feature routes are encapsulated plugins registered by src/app.ts.
import { isUtf8 } from "node:buffer";
import { randomUUID } from "node:crypto";
import cors from "@fastify/cors";
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from "fastify";
import type { Logger } from "pino";
import type { Config } from "../types.ts";
import { ApiError, BadRequestError } from "../errors.ts";
import { exceedsDepth, MAX_JSON_DEPTH } from "../json-depth.ts";
import { clientErrorResponse, errorHandler, notFoundHandler } from "./error-handler.ts";

const REQUEST_ID_RE = /^[A-Za-z0-9._:-]{1,128}$/;

export interface HttpServerOptions {
  config: Config;
  logger: Logger;
  /** Readiness probe: resolves to named checks; any not "ok" makes /readyz answer 503. */
  readiness: () => Promise<Record<string, string>>;
  /** Each dependency's state, shown by /healthz (which answers 200 whatever they are). */
  dependencies?: () => Promise<Record<string, string>>;
}

/** TRUST_PROXY as Fastify takes it: a number of proxies is "trust the first n hops". */
/**
 * Why a body the prototype-safe parser refused is refused, when it is JSON: a member named
 * `__proto__`, or `constructor` holding `prototype` (Fastify's parser answers those as "not valid
 * JSON" like a syntax error). Plain JSON.parse makes such a key an own member, harmless here;
 * only bodies already refused are parsed again.
 */
function prototypeMember(text: string): BadRequestError | null {
  try {
    JSON.parse(text);
  } catch {
    return null;
  }
  return new BadRequestError(
    "INVALID_JSON",
    "The request body has a member named __proto__, or constructor holding prototype: such names are not accepted anywhere in a body; rename the member.",
  );
}

function trustProxyOption(trust: Config["trustProxy"]) {
  if (typeof trust !== "number") return trust;
  return (_address: string, hop: number) => hop < trust;
}

export async function buildHttpServer(opts: HttpServerOptions): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: opts.logger as unknown as FastifyBaseLogger,
    bodyLimit: opts.config.bodyLimitBytes,
    return503OnClosing: true,
    // request.ip: the socket's peer, or the client a trusted proxy names (TRUST_PROXY).
    trustProxy: trustProxyOption(opts.config.trustProxy),
    // A request must arrive whole within the timeout (a body that never completes is a 408), and
    // Node checks the open connections for it every second instead of every 30 s.
    requestTimeout: opts.config.requestTimeoutMs,
    http: {
      // Given to Node's server too: it checks headersTimeout <= requestTimeout when the server is
      // made, before Fastify sets requestTimeout (Node's default is 300 s).
      requestTimeout: opts.config.requestTimeoutMs,
      headersTimeout: opts.config.requestTimeoutMs,
      connectionsCheckingInterval: Math.min(1000, opts.config.requestTimeoutMs),
    },
    // What Node refuses before Fastify sees a request (431 headers or URL over 16 KB, 400
    // unparsable HTTP, 408 timeout) is answered in the standard body too.
    clientErrorHandler: clientErrorResponse,
    genReqId(req) {
      const given = req.headers["x-request-id"];
      return typeof given === "string" && REQUEST_ID_RE.test(given) ? given : randomUUID();
    },
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 500 },
    // Errors raised before routing (a malformed URL) get the standard body too.
    frameworkErrors(error, request, reply) {
      reply.header("X-Request-ID", request.id);
      return errorHandler(error, request, reply);
    },
  });

  // request.clientAddress: request.ip, unless a backend's gateway names the client (secret.ts).
  app.decorateRequest("clientAddress", "");
  // Hooks of every request that never wait are written with `done`, not async: an async hook costs
  // each request two promises and a turn of the microtask queue (issue 19).
  app.addHook("onRequest", (request, reply, done) => {
    request.clientAddress = request.ip;
    reply.header("X-Request-ID", request.id);
    done();
  });

  // Graceful shutdown: close() waits for requests in flight; their responses close the
  // connection, so that a keep-alive client does not hold the server open until it times out.
  let closing = false;
  app.addHook("preClose", async () => {
    closing = true;
  });
  app.addHook("onSend", (_request, reply, payload, done) => {
    if (closing) reply.header("Connection", "close");
    done(null, payload);
  });

  await app.register(cors, {
    // An OPTIONS that is no preflight (no Origin or Access-Control-Request-Method) is answered as
    // one, 204 with the allowed methods, instead of the plugin's 400 in text/plain.
    strictPreflight: false,
    origin: opts.config.corsOrigins,
    methods: ["GET", "POST", "PUT", "PATCH", "DELETE"],
    allowedHeaders: [
      "Authorization",
      "Content-Type",
      "X-Request-ID",
      "canary-mode",
      "developer",
      "microservice",
    ],
    exposedHeaders: [
      "X-Request-ID",
      "X-Access-Token",
      "X-RateLimit-Limit",
      "X-RateLimit-Remaining",
      "X-RateLimit-Reset",
      "Retry-After",
      // GET /vars's paging (src/rest/read-routes.ts): a select list on another origin must see it.
      "X-Has-More",
      "X-Next-Offset",
    ],
    maxAge: 86400,
  });

  // Bodies are JSON (spec 4.1): a text/plain body is a 415 like any other type, not a string.
  // A plugin that takes another type (multipart uploads, a proxy) registers its own parser.
  app.removeContentTypeParser("text/plain");
  // An empty body sent with Content-Type: application/json (clients that set the header on every
  // request, DELETE and logout included) is no body, not invalid JSON; routes that need a body
  // refuse undefined themselves. Everything else goes to Fastify's own (prototype-safe) parser.
  // Read as bytes: JSON is UTF-8 (RFC 8259 §8.1), and bytes that are not would be decoded to
  // U+FFFD and stored so; they are refused instead, as an import's are.
  const parseJson = app.getDefaultJsonParser("error", "error");
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("application/json", { parseAs: "buffer" }, (request, body, done) => {
    // Bodies are read as sent: a compressed one would be taken for bytes that are not JSON.
    const encoding = request.headers["content-encoding"];
    if (encoding !== undefined && encoding.trim().toLowerCase() !== "identity") {
      return done(
        new ApiError(
          415,
          "UNSUPPORTED_MEDIA_TYPE",
          "UnsupportedMediaType",
          `Content-Encoding ${encoding.slice(0, 40)} is not supported: send the body uncompressed.`,
        ),
        undefined,
      );
    }
    if (typeof body !== "string" && !isUtf8(body)) {
      return done(
        new BadRequestError(
          "INVALID_ENCODING",
          "The request body is not valid UTF-8: send JSON encoded as UTF-8.",
        ),
        undefined,
      );
    }
    const text = typeof body === "string" ? body : body.toString("utf8");
    if (text.trim() === "") return done(null, undefined);
    return parseJson(request, text, (err, value) => {
      if (err) return done(prototypeMember(text) ?? err, undefined);
      if (exceedsDepth(value)) {
        return done(
          new BadRequestError(
            "INVALID_JSON",
            `The request body is nested deeper than ${MAX_JSON_DEPTH} levels.`,
          ),
          undefined,
        );
      }
      return done(null, value);
    });
  });

  app.setErrorHandler(errorHandler);
  app.setNotFoundHandler(notFoundHandler);

  // Liveness: the process answers. The dependencies are a detail (docs/faults.md): a replica is
  // not restarted because the database or the broker is away.
  app.get("/healthz", async () => {
    const dependencies = await opts.dependencies?.().catch(() => null);
    return dependencies ? { status: "ok", dependencies } : { status: "ok" };
  });
  app.get("/readyz", async (_request, reply) => {
    let checks: Record<string, string>;
    try {
      checks = await opts.readiness();
    } catch (err) {
      checks = { error: err instanceof Error ? err.message : String(err) };
    }
    const ready = Object.values(checks).every((v) => v === "ok");
    if (ready) return { status: "ready", checks };
    return reply.status(503).send({
      error: "ServiceUnavailable",
      message: "The service is not ready.",
      code: "NOT_READY",
      status: 503,
      details: checks,
    });
  });

  return app;
}

declare module "fastify" {
  interface FastifyRequest {
    /**
     * The client's address, for the login lock and the rate limits: request.ip (TRUST_PROXY
     * applied), or on a backend the address its gateway forwarded (src/gateway/secret.ts).
     */
    clientAddress: string;
  }
}
