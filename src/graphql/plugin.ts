// GraphQL over HTTP at /graphql and /api/v4/graphql. The caller is authenticated once per HTTP
// request (the protected scope's hook), with the same rate limits as REST; what fails before
// GraphQL runs answers in GraphQL's error shape with the REST code and status. Every operation
// passes one chain of rules (src/graphql/chain.ts), carried by the plain POST transport
// (src/graphql/plain-post.ts) or by graphql-yoga (GET, SSE subscriptions, refusals). The schema is
// the one of the caller's access profile under the current metadata version (src/schema/cache.ts):
// introspection shows what the caller may query, over HTTP and WebSocket alike.
import { AsyncLocalStorage } from "node:async_hooks";
import type { FastifyBaseLogger, FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import { LRUCache } from "lru-cache";
import type { Plugin, YogaServerInstance } from "graphql-yoga";
import { isAsyncIterable } from "@envelop/core";
import { bearerToken } from "../auth/request-input.ts";
import { ApiError } from "../errors.ts";
import { clientAborted, closeIfUnread, errorHandler, mapError } from "../http/error-handler.ts";
import { httpLaneClient, type LaneClient } from "../http/heavy-requests.ts";
import { callerOf } from "../http/protected.ts";
import { requestBudget } from "../resolvers/write/context.ts";
import type { RouteDeps } from "../rest/deps.ts";
import type { Caller } from "../types.ts";
import { createSchemaCache } from "../schema/cache.ts";
import { accepts, acceptsAnyAnswer, notAcceptableBody, STREAM_MEDIA_TYPE } from "./accept.ts";
import { type ChainContext, graphqlChain } from "./chain.ts";
import { createValueEstimate } from "./complexity.ts";
import { createDocumentCache } from "./document-cache.ts";
import { createMaskError } from "./errors.ts";
import { graphiqlAsset, sendGraphiQLPage } from "./graphiql-page.ts";
import { tokenExpiry } from "./guarded-stream.ts";
import { createPersistedOperations, persistedParams } from "./persisted.ts";
import { createPlainPost } from "./plain-post.ts";
import { checkHttpParams } from "./request-params.ts";
import type { GraphQLContext } from "./resolve.ts";
import { graphqlResolvers } from "./resolve.ts";
import { createSubscriptionGuard } from "./subscription-guard.ts";
import { attachGraphQLWebSocket } from "./websocket.ts";

export const GRAPHQL_PATHS = ["/graphql", "/api/v4/graphql"] as const;

/** Tenants whose GraphQL services (with their read gate) are kept; past it the least recently used go. */
const MAX_TENANT_VIEWS = 1000;

const GRAPHIQL_DEFAULT_QUERY = `# Paste your token in the Headers tab below, then run a query, e.g.
# { CUST(source: "anag-1", limit: 5) { data { CUST_ID NAME } meta { total } } }
`;

/**
 * A browser asking for the page: GET, HTML accepted (yoga's rule), whatever the URL's parameters:
 * GraphiQL keeps its document in `?query=` and reads it back when the page is reloaded.
 */
function wantsGraphiQL(request: FastifyRequest): boolean {
  return request.method === "GET" && (request.headers.accept ?? "").includes("text/html");
}

interface ServerContext {
  req: FastifyRequest;
  reply: FastifyReply;
  caller: Caller;
}

/**
 * A GraphQL operation's context over HTTP. What only some operations read (the lane client of a
 * heavy one, the token's expiry for a subscription) are getters of the class, made once: a getter
 * in an object literal gives each request its own accessor pair, which V8 allocates in the old
 * generation; its closures then held the request and its reply through every young collection
 * until the next full one, and each GraphQL request's objects were promoted (docs/decisions.md,
 * "Per-request objects have no accessors of their own").
 */
class HttpOperationContext implements ServerContext, ChainContext {
  readContexts: ChainContext["readContexts"] = undefined;
  pageLoaders: ChainContext["pageLoaders"] = undefined;
  resolverState: ChainContext["resolverState"] = undefined;
  currentEvent: ChainContext["currentEvent"] = undefined;

  constructor(
    readonly req: FastifyRequest,
    readonly reply: FastifyReply,
    readonly caller: Caller,
    readonly services: ChainContext["services"],
    readonly writeBudget: ChainContext["writeBudget"],
  ) {}

  /** Asked for by a heavy operation only. */
  get laneClient(): LaneClient {
    return httpLaneClient(this.reply.raw);
  }

  /** Read by subscriptions only: not decoded for every query. */
  get tokenExpiresAt(): number | null {
    return tokenExpiry(tokenOf(this.req));
  }

  /** Read by subscriptions only: whether the Accept header takes their stream (SSE). */
  get acceptsEventStream(): boolean {
    return accepts(this.req.headers.accept, STREAM_MEDIA_TYPE);
  }
}

/**
 * yoga's answer to a result no media type of the request's Accept header takes: the standard 406
 * error body (yoga's own is an empty `null`), and a stream that never started is closed, so that
 * whatever it holds (a live-subscription place) is given back. The chain refuses such requests
 * before they run (`acceptsEventStream`, and the route's check of the Accept header): this is
 * the net under both.
 */
const answerNotAcceptable: Plugin = {
  onResultProcess({ result, resultProcessor, setResult, setResultProcessor }) {
    if (resultProcessor) return;
    const stream = isAsyncIterable(result);
    if (stream) void Promise.resolve(result[Symbol.asyncIterator]().return?.()).catch(() => undefined);
    setResult({ errors: [] });
    setResultProcessor(
      (_result, fetchAPI) =>
        new fetchAPI.Response(JSON.stringify(notAcceptableBody(stream ? "subscription" : "request")), {
          status: 406,
          headers: { "content-type": "application/json; charset=utf-8" },
        }),
      "application/json",
    );
  },
};

/** The verified bearer token of the request, or null. */
function tokenOf(request: FastifyRequest): string | null {
  try {
    return bearerToken(request);
  } catch {
    return null;
  }
}

export const graphqlRoutes: FastifyPluginAsync<RouteDeps> = async (
  app,
  { services, auth, heavy, readGate },
) => {
  // What fails before GraphQL runs (no or a bad token, a spent rate limit, a body that is not
  // JSON) answers with its REST status in GraphQL's error shape.
  app.setErrorHandler((err, request, reply) => {
    // A client that went away: nobody reads the answer, nothing went wrong (issue 35 §6).
    if (clientAborted(err, request)) return errorHandler(err, request, reply);
    const mapped = mapError(err, request.id, { bodyLimit: request.routeOptions.bodyLimit });
    closeIfUnread(err, reply);
    if (mapped.status >= 500) request.log.error({ err }, "GraphQL request failed");
    if (mapped.headers) reply.headers(mapped.headers);
    const { error: _type, message, code, status, ...extras } = mapped.body;
    return reply
      .status(mapped.status)
      .send({ errors: [{ message, extensions: { code, status, ...extras } }] });
  });
  const schemas = createSchemaCache(services.metadata, graphqlResolvers());
  app.addHook("onClose", async () => schemas.close());

  // Live subscriptions: capped, and ended when their session, token or grants no longer hold.
  const guard = createSubscriptionGuard({
    db: services.db,
    clock: services.clock,
    limits: services.config.subscriptions,
    onError: (err) => services.logger.warn({ err }, "Re-checking live subscriptions failed"),
  });
  app.addHook("onClose", async () => guard.stop());
  // Closing: every live subscription ends with one error result (503 SERVICE_CLOSING), so that
  // its stream (SSE) ends and the server's close, which waits for requests in flight, can finish;
  // the WebSocket closes its sockets itself (below). The client subscribes again elsewhere.
  app.addHook("preClose", async () =>
    guard.endAll(
      new ApiError(
        503,
        "SERVICE_CLOSING",
        "ServiceUnavailable",
        "The service is shutting down: subscribe again (another instance, or this one once it is back).",
      ),
    ),
  );

  // What a resolver (or the database under it) threw, as the client sees it: one function. An
  // unexpected error is logged with its request's id (spec graphql.md; masking has no context of
  // its own): the HTTP route runs each request with its request logger here, the WebSocket each
  // operation with its request id (`ws-<socket>:<operation id>`) there, logged by the service's
  // logger under the same `reqId` key.
  const requestLogger = new AsyncLocalStorage<FastifyBaseLogger>();
  const socketOperation = new AsyncLocalStorage<string>();
  const maskError = createMaskError((err) => {
    const log = requestLogger.getStore();
    if (log) return log.error({ err }, "GraphQL resolver failed");
    const reqId = socketOperation.getStore();
    services.logger.error(reqId === undefined ? { err } : { reqId, err }, "GraphQL resolver failed");
  });
  // The one chain of rules (src/graphql/chain.ts), shared by both transports of both endpoints.
  const chain = graphqlChain({
    limits: services.config.graphql,
    writeLimits: services.config,
    model: () => services.metadata.current(),
    documents: createDocumentCache(services.config.graphql.documentCacheBytes),
    estimate: createValueEstimate(),
    heavy,
    guard,
    metrics: services.metrics,
    maskError,
  });
  // Persisted operations (src/graphql/persisted.ts): resolved to their document by both
  // transports, before the chain, by the same function.
  const persisted = createPersistedOperations(
    services.config.graphql.persisted,
    services.config.graphql.maxDocumentBytes,
  );
  const plainPost = createPlainPost(chain as never, persisted);

  // Reads pass the caller's tenant's gate: one operation cannot hold the database. The services
  // a tenant's operations see are made once per tenant, not per request (the gate keeps its lanes
  // per tenant either way); inherited, not copied: a copy would call their lazy getters, Prisma's.
  const tenantServices = new LRUCache<string, GraphQLContext["services"]>({ max: MAX_TENANT_VIEWS });
  // On the tenant's database (decisions.md §18): 503 while it is unreachable; made again when the
  // tenant's database changes (tenant:move).
  const servicesOf = (tenantId: string): GraphQLContext["services"] => {
    const base = services.forTenant(tenantId);
    let view = tenantServices.get(tenantId);
    if (!view || Object.getPrototypeOf(view) !== base) {
      view = Object.assign(Object.create(base) as typeof services, {
        readDb: readGate.queryable(base.readDb, tenantId),
      });
      tenantServices.set(tenantId, view);
    }
    return view;
  };

  // GraphQL over WebSocket on the same paths, through the same chain (src/graphql/websocket.ts).
  const webSocket = attachGraphQLWebSocket({
    server: app.server,
    paths: GRAPHQL_PATHS,
    // A backend's upgrades need the gateway's secret, as its requests do (src/app.ts).
    gatewaySecret: ["read", "write", "auth"].includes(services.config.role)
      ? services.config.gateway.secret
      : null,
    chain,
    schema: (caller) => schemas.forCaller(caller.principal),
    authenticate: (authorization, address, requestId) =>
      auth.authenticateBearer(authorization, address, requestId),
    context: (caller, tokenExpiresAt, laneClient) => ({
      laneClient,
      caller,
      tokenExpiresAt,
      services: servicesOf(caller.principal.tenantId),
      readContexts: undefined,
      pageLoaders: undefined,
      writeBudget: requestBudget(services.config),
    }),
    persisted,
    limits: { ...services.config.webSocket, maxMessageBytes: services.config.graphql.maxBodyBytes },
    clock: services.clock,
    metrics: services.metrics,
    onError: (err) => services.logger.warn({ err }, "GraphQL WebSocket failed"),
    asRequest: (requestId, work) => socketOperation.run(requestId, work),
  });
  app.addHook("preClose", async () => webSocket.close());

  for (const endpoint of GRAPHQL_PATHS) {
    // graphql-yoga carries what the plain POST leaves (GET, subscriptions, a document refused
    // before it runs, other media types), through the same chain: imported and made on the first
    // such request, so that a process whose clients only POST valid JSON never loads it (about
    // 5 MB of peak resident memory; docs/benchmarks.md). Its own caches are off: they key on the
    // whole text (the chain's keep parsed documents by hash).
    let yoga: Promise<YogaServerInstance<ServerContext, ChainContext>> | null = null;
    const yogaServer = () =>
      (yoga ??= import("graphql-yoga")
        .then(({ createYoga }) =>
          createYoga<ServerContext, ChainContext>({
            graphqlEndpoint: endpoint,
            schema: ({ caller }) => schemas.forCaller(caller.principal),
            logging: false,
            graphiql: false,
            landingPage: false,
            parserAndValidationCache: false,
            // The chain masks execution's errors; yoga masks those of its own transport by the same function.
            maskedErrors: { maskError },
            plugins: [persistedParams(persisted), ...chain, answerNotAcceptable] as never[],
          }),
        )
        .catch((err: unknown) => {
          yoga = null; // tried again by the next request
          throw err;
        }));

    // Rendered, hashed and compressed on the first visit (tens of MB of work), then served as is.
    const graphiql = graphiqlAsset(async () => {
      const { renderGraphiQL } = await import("@graphql-yoga/render-graphiql");
      return renderGraphiQL({
        endpoint,
        title: "Dimensio GraphQL",
        headers: JSON.stringify(
          { Authorization: "Bearer <paste an access token from POST /auth/login>" },
          null,
          2,
        ),
        defaultQuery: GRAPHIQL_DEFAULT_QUERY,
        // Subscriptions over the WebSocket, with the Headers tab's token (graphiql-page.ts).
        subscriptionsProtocol: "WS",
      });
    });
    // Other methods: 405 with the GraphQL error body and Allow (GraphQL over HTTP), not a REST 404.
    app.route({
      url: endpoint,
      method: ["PUT", "PATCH", "DELETE"],
      config: { public: true },
      handler: (_request, reply) =>
        reply
          .status(405)
          .header("allow", "GET, POST")
          .send({
            errors: [
              {
                message: `${endpoint} takes GET and POST (and WebSocket upgrades).`,
                extensions: { code: "METHOD_NOT_ALLOWED", status: 405 },
              },
            ],
          }),
    });
    app.route({
      url: endpoint,
      method: ["GET", "POST"],
      // A document is at most 64 KiB; variables carry the data, up to this (a larger body is
      // refused from its Content-Length, unread: REST batches and imports take more).
      bodyLimit: Math.min(services.config.graphql.maxBodyBytes, services.config.bodyLimitBytes),
      // GraphiQL's page needs no token; every GraphQL request does (the protected scope's hook).
      config: { public: wantsGraphiQL },
      handler: (request, reply) => requestLogger.run(request.log, () => answer(request, reply)),
    });
    async function answer(request: FastifyRequest, reply: FastifyReply) {
      if (wantsGraphiQL(request)) {
        // GraphiQL's small page, without a token (its Headers tab holds the Authorization header
        // it sends); its scripts and styles are immutable files (src/graphql/graphiql-page.ts).
        // A visit spends the client's anonymous window (the protected scope's hook).
        return sendGraphiQLPage(request, reply, await graphiql());
      }
      const caller = callerOf(request);
      const context = new HttpOperationContext(
        request,
        reply,
        caller,
        servicesOf(caller.principal.tenantId),
        requestBudget(services.config),
      );
      const answer = await plainPost(request, schemas.forCaller(caller.principal), context);
      if (answer) {
        // The body returned, not the reply (docs/decisions.md, "Handlers return their body").
        reply.status(answer.status).headers(answer.headers);
        return answer.body;
      }
      // An Accept header that takes nothing an answer could be (JSON, GraphQL over SSE): 406
      // before anything runs (yoga would run the operation, a mutation too, then answer `null`).
      if (!acceptsAnyAnswer(request.headers.accept)) {
        reply.status(406);
        return notAcceptableBody("request");
      }
      // What yoga would take for a request but is none (a body without a document, a GET's
      // parameters that are not JSON or nest too deep): one 400 (src/graphql/request-params.ts).
      checkHttpParams(request);
      const response = await (await yogaServer()).handleNodeRequestAndResponse(request, reply, context);
      response.headers.forEach((value, key) => {
        reply.header(key, value);
      });
      reply.status(response.status);
      return reply.send(response.body);
    }
  }
};
