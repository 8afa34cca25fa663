// The request scope of a REST call with a JSON body: `source` and `center_dett` may come in the
// query string or in the body (spec 4.1: source "may also be sent in a write body"). The context
// reads the query string first (src/http/protected.ts); a body that names another value would be
// left unread, so the two must agree.
import type { FastifyRequest } from "fastify";
import { BadRequestError } from "../errors.ts";
import { contextOf } from "../http/protected.ts";
import type { RequestContext } from "../types.ts";

const SCOPE_PARAMETERS = ["source", "center_dett"] as const;

function shown(value: unknown): string {
  return (typeof value === "string" ? value : (JSON.stringify(value) ?? String(value))).slice(0, 60);
}

/** 400 INVALID_PARAMETER when the query string and the JSON body give `source` (or `center_dett`) differently. */
export function checkScopeAgreement(request: FastifyRequest): void {
  const body = request.body;
  if (body === null || typeof body !== "object" || Array.isArray(body)) return;
  const query = (request.query ?? {}) as Record<string, unknown>;
  for (const name of SCOPE_PARAMETERS) {
    const inQuery = query[name];
    // Absent, empty or repeated in the query string: the context decides (the body, or a 400).
    if (typeof inQuery !== "string" || inQuery === "" || !Object.hasOwn(body, name)) continue;
    const inBody = (body as Record<string, unknown>)[name];
    if (inBody === undefined || inBody === null || inBody === "" || inBody === inQuery) continue;
    throw new BadRequestError(
      "INVALID_PARAMETER",
      `${name} is given twice with different values: '${shown(inQuery)}' in the query string, '${shown(inBody)}' in the body. Give it once, or the same in both.`,
      { field: name },
    );
  }
}

/** The call's context (contextOf), once its query string and body agree on the scope. */
export function agreedContextOf(request: FastifyRequest): RequestContext {
  checkScopeAgreement(request);
  return contextOf(request);
}
