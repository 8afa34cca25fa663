// Reads what authentication needs from an HTTP request: the bearer token, only from the
// Authorization header, never the query string.
import type { FastifyRequest } from "fastify";
import { AuthenticationError } from "../errors.ts";

export function bearerToken(request: FastifyRequest): string {
  return bearerOf(request.headers.authorization);
}

/** The token of an Authorization header's value (an HTTP header, or a WebSocket's connection_init). */
export function bearerOf(header: string | undefined): string {
  if (header === undefined || header.trim() === "") {
    throw new AuthenticationError(
      "TOKEN_MISSING",
      "The Authorization header with a bearer token is required.",
    );
  }
  const match = /^Bearer[ \t]+([^\s]+)[ \t]*$/i.exec(header);
  if (!match) {
    if (/^Bearer[ \t]*$/i.test(header.trim())) {
      throw new AuthenticationError("TOKEN_MISSING", "The Authorization header carries no token.");
    }
    throw new AuthenticationError("TOKEN_INVALID", "The Authorization header must be: Bearer <token>.");
  }
  return match[1]!;
}
