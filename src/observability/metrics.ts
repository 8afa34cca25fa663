// Prometheus metrics (decisions.md §16) with prom-client, one registry per process (no global
// default registry): HTTP requests per route and status (count and latency), the database pool,
// the outbox backlog and publish latency, webhook deliveries by status, rate-limit refusals and
// GraphQL operations. Served at GET /metrics.
import type { FastifyInstance, FastifyRequest } from "fastify";
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import { ApiError } from "../errors.ts";
import { GATEWAY_SECRET_HEADER, secretMatches } from "../gateway/secret.ts";
import type { DatabaseHandle } from "../db/database.ts";

export interface Metrics {
  registry: Registry;
  httpRequests: Counter<"method" | "route" | "status">;
  httpDuration: Histogram<"method" | "route" | "status">;
  rateLimitRefusals: Counter<"route">;
  eventsPublished: Counter;
  publishLatency: Histogram;
  webhookDeliveries: Counter<"status">;
  graphqlOperations: Counter<"operation">;
  /** GraphQL documents parsed (the chain's document cache missed them): a known or persisted one is not. */
  graphqlDocumentsParsed: Counter;
  /**
   * GraphQL operations by how they ran: `plan` (src/graphql/planned-execution.ts), `interpreter`
   * (graphql-js's: every mutation and subscription, and a query outside the plan's subset), or
   * `plan_then_interpreter` (a planned run met an error or a null graphql-js must answer).
   */
  graphqlExecutions: Counter<"by">;
  /**
   * Subscription results sent over WebSocket, by `serialised` (made into JSON for the first
   * subscriber of an event and field set) or `shared` (that JSON sent again).
   */
  graphqlWsEventResults: Counter<"by">;
  /** Rate-limit decisions made in memory because Redis did not answer, by window. */
  rateLimitFallbacks: Counter<"window">;
  /** Reads the primary served because the read replica (DATABASE_READ_URL) was unreachable. */
  readReplicaFallbacks: Counter;
}

/** `db` null (the gateway): no database gauges. */
export function createMetrics(opts: { db: DatabaseHandle | null; role: string }): Metrics {
  const registry = new Registry();
  registry.setDefaultLabels({ role: opts.role });
  // prom-client's own names start with process_ and nodejs_: the prefix is the service's alone.
  collectDefaultMetrics({ register: registry, prefix: "dimensio_" });
  const { db } = opts;
  if (db) registerDatabaseGauges(registry, db);
  return {
    registry,
    httpRequests: new Counter({
      name: "dimensio_http_requests_total",
      help: "HTTP requests by method, route pattern and status.",
      labelNames: ["method", "route", "status"],
      registers: [registry],
    }),
    httpDuration: new Histogram({
      name: "dimensio_http_request_duration_seconds",
      help: "HTTP request latency by method, route pattern and status.",
      labelNames: ["method", "route", "status"],
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers: [registry],
    }),
    rateLimitRefusals: new Counter({
      name: "dimensio_rate_limit_refusals_total",
      help: "Requests refused with 429 by route pattern.",
      labelNames: ["route"],
      registers: [registry],
    }),
    eventsPublished: new Counter({
      name: "dimensio_events_published_total",
      help: "Outbox events the relay published (confirmed by the bus).",
      registers: [registry],
    }),
    publishLatency: new Histogram({
      name: "dimensio_event_publish_latency_seconds",
      help: "From the outbox row's CREATED_AT to the bus's confirm.",
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5, 30, 300],
      registers: [registry],
    }),
    webhookDeliveries: new Counter({
      name: "dimensio_webhook_deliveries_total",
      help: "Webhook delivery attempts by outcome (success, retrying, failed).",
      labelNames: ["status"],
      registers: [registry],
    }),
    graphqlOperations: new Counter({
      name: "dimensio_graphql_operations_total",
      help: "GraphQL operations executed, by type.",
      labelNames: ["operation"],
      registers: [registry],
    }),
    graphqlDocumentsParsed: new Counter({
      name: "dimensio_graphql_documents_parsed_total",
      help: "GraphQL documents parsed: requests whose document the parsed-document cache did not hold.",
      registers: [registry],
    }),
    graphqlWsEventResults: new Counter({
      name: "dimensio_graphql_ws_event_results_total",
      help: "Subscription results sent over WebSocket: serialised for an event and field set, or shared (sent again).",
      labelNames: ["by"],
      registers: [registry],
    }),
    graphqlExecutions: new Counter({
      name: "dimensio_graphql_executions_total",
      help: "GraphQL operations by how they ran: plan, interpreter, or plan_then_interpreter.",
      labelNames: ["by"],
      registers: [registry],
    }),
    rateLimitFallbacks: new Counter({
      name: "dimensio_rate_limit_fallbacks_total",
      help: "Rate-limit decisions made in this process's memory because Redis did not answer, by window.",
      labelNames: ["window"],
      registers: [registry],
    }),
    readReplicaFallbacks: new Counter({
      name: "dimensio_read_replica_fallbacks_total",
      help: "Reads served by the primary because the read replica (DATABASE_READ_URL) was unreachable.",
      registers: [registry],
    }),
  };
}

/** The longest a scrape waits for the outbox count. */
const OUTBOX_COUNT_WAIT_MS = 1000;

function registerDatabaseGauges(registry: Registry, db: DatabaseHandle): void {
  new Gauge({
    name: "dimensio_db_pool_connections",
    help: "PostgreSQL pool connections by state (the embedded database has one connection).",
    labelNames: ["state"],
    registers: [registry],
    collect() {
      if (db.kind !== "postgres") {
        this.set({ state: "total" }, 1);
        return;
      }
      this.set({ state: "total" }, db.pool.totalCount);
      this.set({ state: "idle" }, db.pool.idleCount);
      this.set({ state: "waiting" }, db.pool.waitingCount);
    },
  });
  new Gauge({
    name: "dimensio_outbox_backlog",
    help: "Outbox rows not yet published.",
    registers: [registry],
    async collect() {
      // A scrape is not held by a database that does not answer: past OUTBOX_COUNT_WAIT_MS the
      // gauge keeps its last value (and the count, when it comes, sets it for the next scrape).
      const counting = db
        .query<{ n: number }>(
          `SELECT count(*)::int AS n FROM "TB_ANAG_OUTBOX00" WHERE "PUBLISHED_AT" IS NULL`,
        )
        .then(
          ({ rows }) => this.set(rows[0]?.n ?? 0),
          () => {}, // a database that is down shows in /readyz and dimensio_dependency_up
        );
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        counting,
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, OUTBOX_COUNT_WAIT_MS);
          timer.unref();
        }),
      ]);
      clearTimeout(timer);
    },
  });
}

/** Who may scrape GET /metrics; nothing set: anyone who reaches the port. */
export interface MetricsAccess {
  /**
   * The gateway's secret: its /metrics answers a scraper that sends it (x-gateway-secret), as a
   * backend's does, since the gateway is the process on the public network.
   */
  gatewaySecret?: string | null;
  /** METRICS_TOKEN: a scraper sending `Authorization: Bearer <token>` may read it, on every role. */
  token?: string | null;
}

/** The bearer token of an Authorization header, or null (no header, another scheme). */
function bearerOrNull(header: string | undefined): string | null {
  const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header ?? "");
  return match ? match[1]! : null;
}

/**
 * Request metrics for every route of `app`, labelled with `route` (the route pattern for the API,
 * the backend chosen for the gateway), and GET /metrics in the Prometheus text format, for the
 * scrapers `access` lets in.
 */
export function serveMetrics(
  app: FastifyInstance,
  metrics: Metrics,
  route: (request: FastifyRequest) => string,
  access: MetricsAccess = {},
): void {
  const { gatewaySecret = null, token = null } = access;
  // Written with `done`, not async: two promises fewer per request (issue 19).
  app.addHook("onResponse", (request, reply, done) => {
    const labels = { method: request.method, route: route(request), status: String(reply.statusCode) };
    metrics.httpRequests.inc(labels);
    metrics.httpDuration.observe(labels, reply.elapsedTime / 1000);
    if (reply.statusCode === 429) metrics.rateLimitRefusals.inc({ route: labels.route });
    done();
  });
  app.get("/metrics", async (request, reply) => {
    if (gatewaySecret !== null || token !== null) {
      const bySecret =
        gatewaySecret !== null && secretMatches(gatewaySecret, request.headers[GATEWAY_SECRET_HEADER]);
      const bearer = bearerOrNull(request.headers.authorization);
      const byToken = token !== null && bearer !== null && secretMatches(token, bearer);
      if (!bySecret && !byToken)
        throw token === null
          ? new ApiError(
              403,
              "GATEWAY_SECRET_REQUIRED",
              "PermissionDenied",
              "The gateway's /metrics answers a scraper that sends the x-gateway-secret header (GATEWAY_SECRET): configure the scraper with it.",
            )
          : new ApiError(
              403,
              "METRICS_TOKEN_REQUIRED",
              "PermissionDenied",
              `/metrics answers a scraper that sends Authorization: Bearer <METRICS_TOKEN>${gatewaySecret === null ? "" : " (or the x-gateway-secret header)"}: configure the scraper with it.`,
            );
    }
    reply.type(metrics.registry.contentType);
    return metrics.registry.metrics();
  });
}
