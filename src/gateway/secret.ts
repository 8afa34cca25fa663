// The shared secret between the gateway and its backends (decisions.md §9): the gateway adds it to
// every request it forwards; a backend refuses any request without it (health checks excepted),
// comparing in constant time.
import { createHash, timingSafeEqual } from "node:crypto";
import type { FastifyInstance } from "fastify";
import { ApiError } from "../errors.ts";

export const GATEWAY_SECRET_HEADER = "x-gateway-secret";
const OPEN_PATHS = new Set(["/healthz", "/readyz"]);

const digest = (s: string) => createHash("sha256").update(s).digest();

export function secretMatches(expected: string, given: unknown): boolean {
  return typeof given === "string" && timingSafeEqual(digest(expected), digest(given));
}

export function requireGatewaySecret(app: FastifyInstance, secret: string): void {
  app.addHook("onRequest", async (request) => {
    if (OPEN_PATHS.has(request.url.split("?")[0]!)) return;
    if (!secretMatches(secret, request.headers[GATEWAY_SECRET_HEADER])) {
      throw new ApiError(
        403,
        "GATEWAY_REQUIRED",
        "PermissionDenied",
        "This backend answers requests from the gateway only: send requests to the gateway (it adds the x-gateway-secret header), or set the same GATEWAY_SECRET on both.",
      );
    }
  });
}
