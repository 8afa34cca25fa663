// GraphQL over HTTP at /graphql and /api/v4/graphql (graphql-yoga inside a Fastify route). The
// caller is authenticated once per HTTP request, with the same rate limits as REST; what fails
// before GraphQL runs answers in GraphQL's error shape with the REST code and status. The schema
// is the one of the current metadata version (src/schema/cache.ts).
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import { type DocumentNode, type ExecutionResult, GraphQLError } from "graphql";
import { decodeJwt } from "jose";
import { LRUCache } from "lru-cache";
import { bearerToken } from "../auth/request-input.ts";
import type { Plugin, YogaServerInstance } from "graphql-yoga";
import { ApiError } from "../errors.ts";
import { mapError } from "../http/error-handler.ts";
import { callerOf } from "../http/protected.ts";
import { MAX_JSON_DEPTH } from "../json-depth.ts";
import { requestBudget } from "../resolvers/write/context.ts";
import type { RouteDeps } from "../rest/deps.ts";
import { createSchemaCache } from "../schema/cache.ts";
import { chooseEncoding, graphiqlAsset, notModified } from "./graphiql-page.ts";
import { type Admission, createSubscriptionGuard } from "./subscription-guard.ts";
import { createFastPath, executeFast } from "./fast-path.ts";
import {
  checkComplexity,
  MAX_SOURCE_NESTING,
  MAX_TOKENS,
  createValueEstimate,
  sourceNesting,
  tooComplex,
} from "./complexity.ts";
import { type GraphQLContext, graphqlResolvers } from "./resolve.ts";

export const GRAPHQL_PATHS = ["/graphql", "/api/v4/graphql"] as const;

/** Tenants whose GraphQL services (with their read gate) are kept; past it the least recently used go. */
const MAX_TENANT_VIEWS = 1000;

const GRAPHIQL_DEFAULT_QUERY = `# Paste your token in the Headers tab below, then run a query, e.g.
# { CUST(source: "anag-1", limit: 5) { data { CUST_ID NAME } meta { total } } }
`;

/** A browser asking for the page: GET, HTML accepted, no GraphQL parameters. */
function wantsGraphiQL(request: FastifyRequest): boolean {
  if (request.method !== "GET") return false;
  const query = request.query as Record<string, unknown>;
  return (request.headers.accept ?? "").includes("text/html") && query.query === undefined;
}

interface ServerContext {
  req: FastifyRequest;
  reply: FastifyReply;
}

/** An error thrown by a resolver (or the database under it) as GraphQL error extensions. */
function toGraphQLError(error: GraphQLError, log: (err: unknown) => void): GraphQLError {
  let original: unknown = error.originalError;
  while (original instanceof GraphQLError && original.originalError) original = original.originalError;
  if (original === undefined || original instanceof GraphQLError) return error;
  const mapped = mapError(original);
  if (mapped.status >= 500 && !(original instanceof ApiError)) log(original);
  const { error: _type, message, code, status, ...extras } = mapped.body;
  const masked = new GraphQLError(
    mapped.status >= 500 && !(original instanceof ApiError) ? "Unexpected error." : message,
    {
      nodes: error.nodes,
      path: error.path,
      extensions: { code, status, ...extras },
    },
  );
  // graphql-jit's errors (the fast path) carry their locations without the nodes.
  if (!error.nodes && error.locations) (masked as { locations?: unknown }).locations = error.locations;
  return masked;
}

/** An error the service raised, as a GraphQL error with the REST code and status. */
function asGraphQLError(err: unknown): GraphQLError {
  if (err instanceof GraphQLError) return err;
  const { error: _type, message, code, status, ...extras } = mapError(err).body;
  return new GraphQLError(message, { extensions: { code, status, ...extras } });
}

/** The expiry (epoch seconds) of the request's bearer token, verified already; null if none. */
function tokenExpiry(request: FastifyRequest): number | null {
  try {
    const { exp } = decodeJwt(bearerToken(request));
    return typeof exp === "number" ? exp : null;
  } catch {
    return null;
  }
}

interface StopSignal {
  error: ApiError | null;
  /** Told once when the subscription must end (set by the stream that carries it). */
  onEnd: (() => void) | null;
  end: (err: ApiError) => void;
}

function stopSignal(): StopSignal {
  const signal: StopSignal = {
    error: null,
    onEnd: null,
    end(err) {
      if (signal.error) return;
      signal.error = err;
      signal.onEnd?.();
    },
  };
  return signal;
}

/**
 * A subscription's results until `stop` ends it: the source is closed (which answers a pending
 * read with its end and stops its listening), then one result carries the error, then the end.
 */
function guarded(
  source: AsyncIterable<ExecutionResult>,
  stop: StopSignal,
  release: () => void,
): AsyncIterableIterator<ExecutionResult> {
  const it = source[Symbol.asyncIterator]();
  let done = false;
  let closing: Promise<unknown> | null = null;
  const close = () => {
    closing ??= Promise.resolve(it.return?.()).catch(() => undefined);
    return closing;
  };
  stop.onEnd = () => void close();
  const finish = async (): Promise<IteratorResult<ExecutionResult>> => {
    done = true;
    release();
    await close();
    return { value: undefined, done: true };
  };
  const iterator: AsyncIterableIterator<ExecutionResult> = {
    async next() {
      if (done) return { value: undefined, done: true };
      const next = stop.error ? null : await it.next();
      if (stop.error) {
        await finish();
        return { value: { errors: [asGraphQLError(stop.error)] }, done: false };
      }
      if (next?.done) {
        done = true;
        release();
      }
      return next as IteratorResult<ExecutionResult>;
    },
    return: finish,
    async throw(err) {
      await finish();
      throw err;
    },
    [Symbol.asyncIterator]() {
      return iterator;
    },
  };
  return iterator;
}

export const graphqlRoutes: FastifyPluginAsync<RouteDeps> = async (
  app,
  { services, auth, heavy, readGate },
) => {
  // What fails before GraphQL runs (no or a bad token, a spent rate limit, a body that is not
  // JSON) answers with its REST status in GraphQL's error shape.
  app.setErrorHandler((err, request, reply) => {
    const mapped = mapError(err, request.id);
    if (mapped.status >= 500) request.log.error({ err }, "GraphQL request failed");
    if (mapped.headers) reply.headers(mapped.headers);
    const { error: _type, message, code, status, ...extras } = mapped.body;
    return reply
      .status(mapped.status)
      .send({ errors: [{ message, extensions: { code, status, ...extras } }] });
  });
  const schemas = createSchemaCache(services.metadata, graphqlResolvers());
  app.addHook("onClose", async () => schemas.close());
  const limits = services.config.graphql;

  const countOperations: Plugin = {
    onExecute({ args }) {
      const operation = (args.document as DocumentNode).definitions.find(
        (d) => d.kind === "OperationDefinition",
      );
      services.metrics.graphqlOperations.inc({
        operation: operation && "operation" in operation ? operation.operation : "unknown",
      });
    },
  };

  // Live subscriptions: capped, and ended when their session, token or grants no longer hold.
  const guard = createSubscriptionGuard({
    db: services.db,
    clock: services.clock,
    limits: services.config.subscriptions,
    onError: (err) => services.logger.warn({ err }, "Re-checking live subscriptions failed"),
  });
  app.addHook("onClose", async () => guard.stop());
  const guardSubscriptions: Plugin<ServerContext & GraphQLContext> = {
    async onSubscribe({ args, setResultAndStopExecution }) {
      const ctx = args.contextValue;
      const stop = stopSignal();
      let admission: Admission;
      try {
        admission = await guard.admit(ctx.caller.principal, tokenExpiry(ctx.req), stop.end);
      } catch (err) {
        setResultAndStopExecution({ errors: [asGraphQLError(err)] });
        return;
      }
      return {
        onSubscribeResult({ result, setResult }) {
          if (Symbol.asyncIterator in result) setResult(guarded(result, stop, admission.release));
          else admission.release();
        },
      };
    },
  };

  // Heavy operations take turns per tenant (src/http/heavy-requests.ts); the fast path's below.
  // One estimate per (schema, document), shared with the fast path.
  const estimate = createValueEstimate();
  const takeTurns: Plugin<ServerContext & GraphQLContext> = {
    async onExecute({ args, setResultAndStopExecution }) {
      const ctx = args.contextValue;
      const values = estimate(args.schema, args.document, args.operationName);
      let leave: () => void;
      try {
        leave = await heavy.enter(ctx.caller.principal.tenantId, values, ctx.reply);
      } catch (err) {
        setResultAndStopExecution({ errors: [asGraphQLError(err)] });
        return;
      }
      return { onExecuteDone: () => leave() };
    },
  };

  // Before graphql-js validates (some of its rules are quadratic in repeated fields): a document
  // over MAX_TOKENS is not parsed further, an operation over a limit is not validated further.
  const tooDeep = () =>
    tooComplex("The document nests selections or values too deeply to be read.", {
      max_depth: limits.maxDepth,
      max_input_depth: MAX_JSON_DEPTH,
      max_nesting: MAX_SOURCE_NESTING,
    });
  const limitComplexity: Plugin = {
    onParse({ parseFn, setParseFn }) {
      setParseFn((source, options) => {
        const body = typeof source === "string" ? source : source.body;
        if (sourceNesting(body) > MAX_SOURCE_NESTING) throw tooDeep();
        try {
          return parseFn(source, { ...options, maxTokens: MAX_TOKENS });
        } catch (err) {
          if (err instanceof GraphQLError && /\d+ tokens\. Parsing aborted/.test(err.message)) {
            throw tooComplex(`The document has more than ${MAX_TOKENS} tokens.`, { max_tokens: MAX_TOKENS });
          }
          // graphql-js parses recursively: selections or values nested thousands deep overflow it.
          if (err instanceof RangeError) throw tooDeep();
          throw err;
        }
      });
    },
    onValidate({ params, setResult }) {
      let refused: GraphQLError | null;
      try {
        refused = checkComplexity(params.schema, params.documentAST, limits);
      } catch (err) {
        if (!(err instanceof RangeError)) throw err;
        refused = tooDeep();
      }
      if (refused) setResult([refused]);
    },
  };

  // What a resolver (or the database under it) threw, as the client sees it: yoga's and the fast
  // path's errors are masked by this one function.
  const maskError = (error: unknown) =>
    error instanceof GraphQLError
      ? toGraphQLError(error, (err) => services.logger.error({ err }, "GraphQL resolver failed"))
      : new GraphQLError("Unexpected error.", { extensions: { code: "INTERNAL_ERROR", status: 500 } });
  const fastPath = createFastPath(limits, estimate);
  // Reads pass the caller's tenant's gate: one operation cannot hold the database. The services
  // a tenant's operations see are made once per tenant, not per request (the gate keeps its lanes
  // per tenant either way); inherited, not copied: a copy would call their lazy getters, Prisma's.
  const tenantServices = new LRUCache<string, GraphQLContext["services"]>({ max: MAX_TENANT_VIEWS });
  const servicesOf = (tenantId: string): GraphQLContext["services"] => {
    let view = tenantServices.get(tenantId);
    if (!view) {
      view = Object.assign(Object.create(services) as typeof services, {
        readDb: readGate.queryable(services.readDb, tenantId),
      });
      tenantServices.set(tenantId, view);
    }
    return view;
  };

  for (const endpoint of GRAPHQL_PATHS) {
    // graphql-yoga answers what the fast path leaves (GET, subscriptions, a document that does not
    // validate, other media types): imported and made on the first such request, so that a process
    // whose clients only POST known-good JSON never loads it (about 5 MB of peak resident memory;
    // docs/benchmarks.md).
    let yoga: Promise<YogaServerInstance<ServerContext, GraphQLContext>> | null = null;
    const yogaServer = () =>
      (yoga ??= import("graphql-yoga")
        .then(({ createYoga }) =>
          createYoga<ServerContext, GraphQLContext>({
            graphqlEndpoint: endpoint,
            schema: () => schemas.current(),
            logging: false,
            graphiql: false,
            landingPage: false,
            maskedErrors: { maskError },
            plugins: [limitComplexity, countOperations, guardSubscriptions, takeTurns],
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
      });
    });
    app.route({
      url: endpoint,
      method: ["GET", "POST"],
      // GraphiQL's page needs no token; every GraphQL request does (the protected scope's hook).
      config: { public: wantsGraphiQL },
      handler: async (request, reply) => {
        if (wantsGraphiQL(request)) {
          // GraphiQL from the package's bundled assets (no CDN), without a token: the page's
          // Headers tab holds the Authorization header it sends. A visit spends the client's
          // anonymous window like any request without a token.
          await auth.spendAnonymous(request, reply);
          const page = await graphiql();
          reply
            .header("etag", page.etag)
            .header("cache-control", "no-cache")
            .header("vary", "Accept-Encoding")
            .header("content-security-policy", page.csp)
            .header("x-content-type-options", "nosniff")
            .header("referrer-policy", "no-referrer");
          if (notModified(request.headers["if-none-match"], page.etag)) return reply.status(304).send();
          const encoding = chooseEncoding(request.headers["accept-encoding"]);
          if (encoding !== "identity") reply.header("content-encoding", encoding);
          return reply.type("text/html; charset=utf-8").send(page[encoding]);
        }
        const caller = callerOf(request);
        const serverContext: ServerContext & GraphQLContext = {
          req: request,
          reply,
          caller,
          services: servicesOf(caller.principal.tenantId),
          readContexts: new Map(),
          pageLoaders: new Map(),
          writeBudget: requestBudget(services.config),
        };
        // A plain POST of a query or a mutation already known valid skips yoga (src/graphql/fast-path.ts).
        const schema = schemas.current();
        const fast = fastPath.operationOf(request, schema);
        if (fast) {
          const answer = await heavy.run(caller.principal.tenantId, fast.values, reply, () =>
            executeFast(fast, serverContext, maskError),
          );
          if (answer) {
            services.metrics.graphqlOperations.inc({ operation: fast.operation });
            // The body returned, not the reply (docs/decisions.md, "Handlers return their body").
            reply.status(answer.status).headers(answer.headers);
            return answer.body;
          }
        }
        const response = await (await yogaServer()).handleNodeRequestAndResponse(
          request,
          reply,
          serverContext,
        );
        response.headers.forEach((value, key) => {
          reply.header(key, value);
        });
        reply.status(response.status);
        return reply.send(response.body);
      },
    });
  }
};
