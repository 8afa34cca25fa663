// The protected scope: every route registered inside it has its caller authenticated once, by a
// preHandler, before its handler runs (token, session, rate limits, activity mark, renewal). Public
// routes (login, refresh, health) are registered outside it; a route inside may opt out for some
// requests with `config.public` (GraphiQL's page on GET /graphql).
import type { FastifyInstance, FastifyPluginAsync, FastifyRequest } from "fastify";
import type { Auth } from "../auth/service.ts";
import type { RequestContext } from "../types.ts";

declare module "fastify" {
  interface FastifyRequest {
    /** The authenticated caller; set by the protected scope's preHandler. */
    caller: RequestContext | null;
  }
  interface FastifyContextConfig {
    /** The request needs no caller (true, or true for the requests the function accepts). */
    public?: boolean | ((request: FastifyRequest) => boolean);
  }
}

/** The caller of a request in the protected scope (a route outside it asking is a bug). */
export function callerOf(request: FastifyRequest): RequestContext {
  if (!request.caller)
    throw new Error(`${request.method} ${request.url}: no caller (route outside the protected scope?)`);
  return request.caller;
}

export function protectedScope(
  auth: Auth,
  register: (scope: FastifyInstance) => Promise<void>,
): FastifyPluginAsync {
  return async (scope) => {
    scope.decorateRequest("caller", null);
    scope.addHook("preHandler", async (request, reply) => {
      const open = request.routeOptions.config.public;
      if (open === true || (typeof open === "function" && open(request))) return;
      request.caller = await auth.authenticate(request, reply);
    });
    await register(scope);
  };
}
