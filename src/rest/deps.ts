import type { Auth } from "../auth/service.ts";
import type { Services } from "../services.ts";

/** What every REST plugin receives. */
export interface RouteDeps {
  services: Services;
  auth: Auth;
}
