// The authentication service every protected route uses. (Identity issue: tokens, sessions.)
import type { FastifyReply, FastifyRequest } from "fastify";
import { AuthenticationError } from "../errors.ts";
import type { Services } from "../services.ts";
import type { RequestContext } from "../types.ts";

export interface Auth {
  /**
   * Verifies the bearer token and its session, applies rate limits (headers set on `reply`), and
   * builds the RequestContext (source and center_dett from the query string or the JSON body).
   * Throws AuthenticationError (401) / RateLimitError (429).
   */
  authenticate(request: FastifyRequest, reply: FastifyReply): Promise<RequestContext>;
  close(): Promise<void>;
}

export async function createAuth(_services: Services): Promise<Auth> {
  return {
    async authenticate() {
      throw new AuthenticationError("TOKEN_MISSING", "Authentication is not available yet.");
    },
    async close() {},
  };
}
