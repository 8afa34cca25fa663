// The composition root's second half: the HTTP application. Today every role runs in one process
// (ROLE=all); the gateway and the separate backends of decisions.md §9 come with their own issue.
import type { FastifyInstance } from "fastify";
import { ConfigError } from "./config.ts";
import { createReadinessCheck } from "./db/readiness.ts";
import { createHeavyRequests } from "./http/heavy-requests.ts";
import { createTenantGate, gateBounds } from "./ratelimit/tenant-gate.ts";
import { buildHttpServer } from "./http/server.ts";
import { createAuth } from "./auth/service.ts";
import { authRoutes } from "./rest/auth-routes.ts";
import { metadataRoutes } from "./rest/metadata-routes.ts";
import { readRoutes } from "./rest/read-routes.ts";
import { transferRoutes } from "./rest/transfer-routes.ts";
import { documentRoutes } from "./rest/document-routes.ts";
import { mediaRoutes } from "./rest/media-routes.ts";
import { openApiPageRoutes, openApiRoutes } from "./rest/openapi-routes.ts";
import { webhookRoutes } from "./rest/webhook-routes.ts";
import { writeRoutes } from "./rest/write-routes.ts";
import { graphiqlFileRoutes } from "./graphql/graphiql-page.ts";
import { graphqlRoutes } from "./graphql/plugin.ts";
import { protectedScope } from "./http/protected.ts";
import { requireGatewaySecret } from "./gateway/secret.ts";
import { createDependencyHealth, type DependencyProbe, databaseProbe } from "./observability/dependencies.ts";
import { serveMetrics } from "./observability/metrics.ts";
import type { MediaStore } from "./media/store.ts";
import { traceRequests } from "./observability/tracing.ts";
import type { Services } from "./services.ts";
import type { Config } from "./types.ts";

/** Object storage's state: S3's from its requests, the local directory's always there. */
function mediaProbe(media: MediaStore): DependencyProbe {
  return () => media.dependencyState?.() ?? "embedded";
}

/** Roles that serve no API: only the health checks, next to their event work. */
const WORKER_ROLES = new Set(["relay", "webhooks"]);
/** Roles that serve the API behind a gateway. */
const BACKEND_ROLES = new Set(["read", "write", "auth"]);

/** The gateway is not an app over services (src/gateway/server.ts builds it, without a database). */
export function assertRoleAvailable(config: Config): void {
  if (config.role === "gateway") {
    throw new ConfigError([`ROLE: "gateway" runs src/gateway/server.ts (buildGateway), not buildApp.`]);
  }
}

/** Request metrics for every route, and GET /metrics (Prometheus text format). */
function instrument(app: FastifyInstance, services: Services): void {
  traceRequests(app, services.config.role);
  serveMetrics(app, services.metrics, (request) => request.routeOptions.url ?? "unmatched", {
    token: services.config.metricsToken,
  });
}

export async function buildApp(services: Services): Promise<FastifyInstance> {
  assertRoleAvailable(services.config);
  const readiness = createReadinessCheck(services.db);
  // What /healthz and dimensio_dependency_up show; the rate limits' Redis joins with auth below.
  const probes: Record<string, DependencyProbe> = {
    database: databaseProbe(readiness),
    broker: () => services.bus.dependencyState?.() ?? "embedded",
    media: mediaProbe(services.media),
  };
  // The read replica: reads fall back to the primary while it is down, so not part of /readyz.
  const { readReplica } = services;
  if (readReplica)
    probes.database_read = databaseProbe(async () => ({
      database: (await readReplica.check()) === "up" ? "ok" : "down",
    }));
  // Every database profile's state (decisions.md §18): listed, but /readyz depends on the main's only.
  for (const name of services.profiles.names) {
    const check = createReadinessCheck(services.profiles.handle(name));
    const probe = databaseProbe(check);
    probes[`database_${name.toLowerCase()}`] = async () =>
      services.profiles.state(name) === "ready" ? probe() : "down";
    // Its read replica (DATABASE_READ_URL_<NAME>), listed as the main's is: reads fall back to the
    // profile's primary while it is down, so not part of /readyz either.
    if (services.config.databaseProfiles[name]?.readUrl) {
      const replica = databaseProbe(createReadinessCheck(services.profiles.readHandle(name)));
      probes[`database_read_${name.toLowerCase()}`] = replica;
    }
  }
  const dependencies = createDependencyHealth(probes, services.metrics.registry);
  const app = await buildHttpServer({
    config: services.config,
    logger: services.logger,
    readiness,
    dependencies: dependencies.states,
  });
  // Backends behind a gateway (decisions.md §9) answer only requests that carry its secret.
  if (BACKEND_ROLES.has(services.config.role)) requireGatewaySecret(app, services.config.gateway.secret!);
  instrument(app, services);
  if (WORKER_ROLES.has(services.config.role)) return app;
  const auth = await createAuth(services);
  probes.redis = () => auth.dependencyState();
  app.addHook("onClose", async () => auth.close());
  const deps = {
    services,
    auth,
    heavy: createHeavyRequests(services.config.heavyRequests, services.metrics.registry),
    // One gate for every read statement of a tenant, REST's and GraphQL's (issue 35 §4).
    readGate: createTenantGate({
      ...gateBounds(services.db.kind, services.config.graphql.tenantStatements),
      registry: services.metrics.registry,
    }),
  };
  // Every response carries X-RateLimit-* headers (spec 8): authenticated calls show the user's
  // window, login and refresh theirs, refused tokens the IP window they spend; any other answer
  // (a health check, an unknown route) shows that IP window as it stands.
  // Not async (a promise per request): most answers have their headers already and go on at once.
  app.addHook("onSend", (request, reply, payload, done) => {
    if (reply.hasHeader("x-ratelimit-limit")) {
      done(null, payload);
      return;
    }
    auth.showAnonymousWindow(request, reply).then(() => done(null, payload), done);
  });
  await app.register(authRoutes, deps);
  await app.register(openApiPageRoutes);
  await app.register(graphiqlFileRoutes, {
    spendAnonymous: (request, reply) => auth.spendAnonymous(request, reply),
  });
  // Everything but login, refresh and the health checks needs a caller: one preHandler builds it.
  await app.register(
    protectedScope(
      auth,
      async (scope) => {
        await scope.register(metadataRoutes, deps);
        await scope.register(readRoutes, deps);
        await scope.register(writeRoutes, deps);
        await scope.register(transferRoutes, deps);
        await scope.register(webhookRoutes, deps);
        await scope.register(documentRoutes, deps);
        await scope.register(mediaRoutes, deps);
        await scope.register(openApiRoutes, deps);
        await scope.register(graphqlRoutes, deps);
      },
      {
        heavy: deps.heavy,
        bodyBytes: services.config.heavyRequests.bodyBytes,
        bufferBytes: services.config.heavyRequests.bufferBytes,
      },
    ),
  );
  return app;
}
