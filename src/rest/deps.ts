import type { Auth } from "../auth/service.ts";
import type { HeavyRequests } from "../http/heavy-requests.ts";
import type { TenantGate } from "../ratelimit/tenant-gate.ts";
import type { FastifyRequest } from "fastify";
import { callerOf } from "../http/protected.ts";
import type { Services } from "../services.ts";

/** What every REST plugin receives. */
export interface RouteDeps {
  services: Services;
  auth: Auth;
  /** Heavy requests take turns per tenant (src/http/heavy-requests.ts), REST's and GraphQL's alike. */
  heavy: HeavyRequests;
  /** Each tenant's read statements pass one gate (src/ratelimit/tenant-gate.ts), REST's and GraphQL's alike. */
  readGate: TenantGate;
}

/**
 * The services on the database of the request's tenant (decisions.md §18): its records, outbox,
 * webhooks, search and analytics are there; 503 while that database is unreachable.
 */
export function servicesOf(services: Services, request: FastifyRequest): Services {
  return services.forTenant(callerOf(request).principal.tenantId);
}
