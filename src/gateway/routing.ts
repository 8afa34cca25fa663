// Where the gateway sends a request (decisions.md §9): a pure function of the method, the path,
// three headers and the configuration.
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
