// Where the gateway sends a request (decisions.md §9): a pure function of the method, the path,
// three headers and the configuration; and how long it waits for the answer.
import type { Config } from "../types.ts";

export type BackendName =
  | "read"
  | "write"
  | "auth"
  | "canary-read"
  | "canary-write"
  | `microservice:${string}`
  | `developer:${string}`;

export interface RouteChoice {
  name: BackendName;
  url: string;
}

const AUTH_PATH = /^\/(api\/v\d+\/)?auth(\/|$|\?)/;
/** An import's path (src/rest/transfer-routes.ts), with or without a trailing slash and query. */
const IMPORT_PATH = /^\/api\/v\d+\/core\/[^/?]+\/import\/?(\?|$)/;
/**
 * The GraphQL paths (src/graphql/plugin.ts GRAPHQL_PATHS, repeated here so that the gateway does not
 * load the GraphQL stack), where an upgrade to WebSocket is proxied (src/gateway/websocket.ts).
 */
export const GRAPHQL_PATHS: readonly string[] = ["/graphql", "/api/v4/graphql"];

function header(headers: Record<string, string | string[] | undefined>, name: string): string | undefined {
  const v = headers[name];
  return typeof v === "string" && v.trim() !== "" ? v.trim() : undefined;
}

export function chooseBackend(
  config: Pick<Config, "nodeEnv" | "gateway">,
  method: string,
  url: string,
  headers: Record<string, string | string[] | undefined>,
): RouteChoice {
  const g = config.gateway;
  const microservice = header(headers, "microservice");
  if (microservice && Object.hasOwn(g.microserviceRoutes, microservice)) {
    return { name: `microservice:${microservice}`, url: g.microserviceRoutes[microservice]! };
  }
  const developer = header(headers, "developer");
  if (developer && config.nodeEnv === "development" && Object.hasOwn(g.developerRoutes, developer)) {
    return { name: `developer:${developer}`, url: g.developerRoutes[developer]! };
  }
  if (AUTH_PATH.test(url)) return { name: "auth", url: g.authBackendUrl! };
  const canary = header(headers, "canary-mode")?.toLowerCase() === "on";
  if (method === "GET" || method === "HEAD") {
    return canary && g.canaryReadUrl
      ? { name: "canary-read", url: g.canaryReadUrl }
      : { name: "read", url: g.readBackendUrl! };
  }
  return canary && g.canaryWriteUrl
    ? { name: "canary-write", url: g.canaryWriteUrl }
    : { name: "write", url: g.writeBackendUrl! };
}

/**
 * How long the gateway waits for a backend's answer (its headers, then each part of its body):
 * BACKEND_TIMEOUT_MS, except for an import (POST /api/v4/core/:dim/import). An import's answer
 * comes once its rows are written, which the write backend bounds itself: receiving the body by
 * REQUEST_TIMEOUT_MS, writing by IMPORT_WRITE_TIMEOUT_MS (checked before each batch, so the batch
 * under way may take up to STATEMENT_TIMEOUT_MS more). The gateway waits that long plus
 * BACKEND_TIMEOUT_MS for the rest (authentication, the tenant's lane, the answer), so that the
 * client gets the backend's answer (its counts, or its 504 IMPORT_WRITE_TIMEOUT) rather than a 504
 * BACKEND_TIMEOUT while the rows go on being written. The values are the gateway's own
 * environment's: give it those of the write backends.
 */
export function backendTimeoutMs(
  config: Pick<Config, "gateway" | "importWriteTimeoutMs" | "requestTimeoutMs" | "statementTimeoutMs">,
  method: string,
  url: string,
): number {
  const base = config.gateway.backendTimeoutMs;
  if (method !== "POST" || !IMPORT_PATH.test(url)) return base;
  return config.requestTimeoutMs + config.importWriteTimeoutMs + config.statementTimeoutMs + base;
}
