// Reads what authentication needs from an HTTP request: the bearer token (only from the
// Authorization header, never the query string) and the context parameters source and center_dett.
import type { FastifyRequest } from "fastify";
import { AuthenticationError, BadRequestError } from "../errors.ts";

export function bearerToken(request: FastifyRequest): string {
  const header = request.headers.authorization;
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

function stringParam(value: unknown, name: string): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== "string") {
    throw new BadRequestError("INVALID_PARAMETER", `The parameter ${name} must be given once, as a string.`, {
      field: name,
    });
  }
  return value === "" ? null : value;
}

/** A context parameter from the query string, else from a JSON object body. */
export function contextParam(
  request: FastifyRequest,
  queryName: string,
  bodyName = queryName,
): string | null {
  const query = (request.query ?? {}) as Record<string, unknown>;
  const fromQuery = stringParam(query[queryName], queryName);
  if (fromQuery !== null) return fromQuery;
  const body = request.body;
  if (body && typeof body === "object" && !Array.isArray(body)) {
    return stringParam((body as Record<string, unknown>)[bodyName], bodyName);
  }
  return null;
}
