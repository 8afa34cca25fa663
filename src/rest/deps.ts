import type { Auth } from "../auth/service.ts";
import type { HeavyRequests } from "../http/heavy-requests.ts";
import type { TenantGate } from "../ratelimit/tenant-gate.ts";
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
