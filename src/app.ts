// The composition root's second half: the HTTP application. Today every role runs in one process
// (ROLE=all); the gateway and the separate backends of decisions.md §9 come with their own issue.
import type { FastifyInstance } from "fastify";
import { ConfigError } from "./config.ts";
import { createReadinessCheck } from "./db/readiness.ts";
import { buildHttpServer } from "./http/server.ts";
import { createAuth } from "./auth/service.ts";
import { authRoutes } from "./rest/auth-routes.ts";
import { metadataRoutes } from "./rest/metadata-routes.ts";
import { readRoutes } from "./rest/read-routes.ts";
import { writeRoutes } from "./rest/write-routes.ts";
import { graphqlRoutes } from "./graphql/plugin.ts";
import { protectedScope } from "./http/protected.ts";
import type { Services } from "./services.ts";
import type { Config } from "./types.ts";

/** Refuses a ROLE this build cannot run yet, before anything is opened or loaded. */
export function assertRoleAvailable(config: Config): void {
  if (config.role !== "all") {
    throw new ConfigError([
      `ROLE: "${config.role}" is not available yet; separate processes come with the gateway. Use ROLE=all (the default).`,
    ]);
  }
}

export async function buildApp(services: Services): Promise<FastifyInstance> {
  assertRoleAvailable(services.config);
  const app = await buildHttpServer({
    config: services.config,
    logger: services.logger,
    readiness: createReadinessCheck(services.db),
  });
  const auth = await createAuth(services);
  app.addHook("onClose", async () => auth.close());
  const deps = { services, auth };
  // Every response carries X-RateLimit-* headers (spec 8): authenticated calls show the user's
  // window, login and refresh theirs, refused tokens the IP window they spend; any other answer
  // (a health check, an unknown route) shows that IP window as it stands.
  app.addHook("onSend", async (request, reply, payload) => {
    if (!reply.hasHeader("x-ratelimit-limit")) await auth.showAnonymousWindow(request, reply);
    return payload;
  });
  await app.register(authRoutes, deps);
  // Everything but login, refresh and the health checks needs a caller: one preHandler builds it.
  await app.register(
    protectedScope(auth, async (scope) => {
      await scope.register(metadataRoutes, deps);
      await scope.register(readRoutes, deps);
      await scope.register(writeRoutes, deps);
      await scope.register(graphqlRoutes, deps);
    }),
  );
  return app;
}
