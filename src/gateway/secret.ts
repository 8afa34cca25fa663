// The shared secret between the gateway and its backends (decisions.md §9): the gateway adds it to
// every request it forwards; a backend refuses any request without it (health checks excepted),
// comparing in constant time. A request that carries it also carries the client's address in
// X-Forwarded-For, set by the gateway (whatever the client sent is replaced there): the backend
// takes it as request.clientAddress from such a request only.
import { createHash, timingSafeEqual } from "node:crypto";
import net from "node:net";
import type { FastifyInstance } from "fastify";
import { ApiError } from "../errors.ts";

export const GATEWAY_SECRET_HEADER = "x-gateway-secret";
const OPEN_PATHS = new Set(["/healthz", "/readyz"]);

const digest = (s: string) => createHash("sha256").update(s).digest();

export function secretMatches(expected: string, given: unknown): boolean {
  return typeof given === "string" && timingSafeEqual(digest(expected), digest(given));
}

/** The address the gateway put in X-Forwarded-For (its last entry), or null when none is valid. */
export function forwardedClient(header: string | string[] | undefined): string | null {
  const value = Array.isArray(header) ? header[header.length - 1] : header;
  const last = value?.split(",").pop()?.trim() ?? "";
  return net.isIP(last) ? last : null;
}

export function requireGatewaySecret(app: FastifyInstance, secret: string): void {
  app.addHook("onRequest", async (request) => {
    if (OPEN_PATHS.has(request.url.split("?")[0]!)) return;
    if (secretMatches(secret, request.headers[GATEWAY_SECRET_HEADER])) {
      request.clientAddress = forwardedClient(request.headers["x-forwarded-for"]) ?? request.ip;
    } else {
      throw new ApiError(
        403,
        "GATEWAY_REQUIRED",
        "PermissionDenied",
        "This backend answers requests from the gateway only: send requests to the gateway (it adds the x-gateway-secret header), or set the same GATEWAY_SECRET on both.",
      );
    }
  });
}
