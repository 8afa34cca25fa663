// Where the gateway sends a request (decisions.md §9): a pure function of the method, the path,
// three headers, the configuration and, for a GraphQL POST, whether it only reads
// (graphql-operation.ts); and how long it waits for the answer.
import { INT32_MAX } from "../config.ts";
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
 * The metadata whose writes sync dimension tables, and so may build indexes: DIM, VAR and OBJECT
 * (src/resolvers/metadata/write.ts, SHAPING_TABLES; COST, MENU, SORT and DOCUMENT never do). Their
 * writes are POST on the code, PUT, PATCH and DELETE on the code and key (src/rest/write-routes.ts).
 */
const INDEXING_METADATA_PATH = /^\/api\/v\d+\/core\/(DIM|VAR|OBJECT)(\/|\?|$)/;
/**
 * The GraphQL paths (src/graphql/plugin.ts GRAPHQL_PATHS, repeated here so that the gateway does not
 * load the GraphQL stack), where an upgrade to WebSocket is proxied (src/gateway/websocket.ts) and
 * a POST running a query goes to read (server.ts).
 */
export const GRAPHQL_PATHS: readonly string[] = ["/graphql", "/api/v4/graphql"];

function header(headers: Record<string, string | string[] | undefined>, name: string): string | undefined {
  const v = headers[name];
  return typeof v === "string" && v.trim() !== "" ? v.trim() : undefined;
}

/** Whether `url` (its path, query string aside) is one of the GraphQL paths. */
export function isGraphQLPath(url: string): boolean {
  const q = url.indexOf("?");
  const path = q === -1 ? url : url.slice(0, q);
  // The backends' router ignores one trailing slash.
  return GRAPHQL_PATHS.includes(path.endsWith("/") ? path.slice(0, -1) : path);
}

/**
 * `reads`: a request of another method that only reads (a GraphQL POST running a query), sent
 * where a GET goes.
 */
export function chooseBackend(
  config: Pick<Config, "nodeEnv" | "gateway">,
  method: string,
  url: string,
  headers: Record<string, string | string[] | undefined>,
  reads = false,
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
  if (reads || method === "GET" || method === "HEAD") {
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
 * BACKEND_TIMEOUT_MS, except for the requests whose answer comes only once work the backend bounds
 * by a longer timeout of its own is done; the gateway waits that long plus BACKEND_TIMEOUT_MS for
 * the rest (authentication, the tenant's lane, the answer), so that the client gets the backend's
 * answer rather than a 504 BACKEND_TIMEOUT while the work goes on there. The values are the
 * gateway's own environment's: give it those of the backends (deploy/compose.yaml shares one).
 * - An import (POST /api/v4/core/:dim/import) answers once its rows are written: receiving the body
 *   by REQUEST_TIMEOUT_MS, writing by IMPORT_WRITE_TIMEOUT_MS (checked before each batch, so the
 *   batch under way may take up to STATEMENT_TIMEOUT_MS more).
 * - A metadata write that may build indexes (INDEXING_METADATA_PATH) answers once its index builds,
 *   run after its commit, are done: receiving the body by REQUEST_TIMEOUT_MS, its transaction by
 *   STATEMENT_TIMEOUT_MS (the transaction's deadline), a build by INDEX_BUILD_TIMEOUT_MS (past it
 *   the build is cancelled and the change answers with a warning). INDEX_BUILD_TIMEOUT_MS=0 bounds
 *   no build: the gateway then waits without a bound too (0 is undici's "none").
 * No wait exceeds what a timer can hold (INT32_MAX ms, about 24.8 days): a longer one would fire
 * at once.
 */
export function backendTimeoutMs(
  config: Pick<
    Config,
    "gateway" | "importWriteTimeoutMs" | "indexBuildTimeoutMs" | "requestTimeoutMs" | "statementTimeoutMs"
  >,
  method: string,
  url: string,
): number {
  const base = config.gateway.backendTimeoutMs;
  if (method === "GET" || method === "HEAD") return base;
  let waited: number;
  if (method === "POST" && IMPORT_PATH.test(url)) {
    waited = config.requestTimeoutMs + config.importWriteTimeoutMs + config.statementTimeoutMs + base;
  } else if (INDEXING_METADATA_PATH.test(url)) {
    if (config.indexBuildTimeoutMs === 0) return 0;
    waited = config.requestTimeoutMs + config.statementTimeoutMs + config.indexBuildTimeoutMs + base;
  } else {
    return base;
  }
  return Math.min(waited, INT32_MAX);
}
