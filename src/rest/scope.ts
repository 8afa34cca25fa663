// The request scope of a REST call with a body: `source` and `center_dett` may come in the query
// string or in the body (spec 4.1: source "may also be sent in a write body"), a JSON body's
// members or a multipart form's parts. The context reads the query string first
// (src/http/protected.ts); a body that names another value would be left unread, so the two must
// agree.
import type { FastifyRequest } from "fastify";
import { BadRequestError } from "../errors.ts";
import { callerOf, contextOf, scopeOf } from "../http/protected.ts";
import { inScope, type RequestContext } from "../types.ts";

/** The scope parameters a body may give as well as the query string. */
export const SCOPE_PARAMETERS = ["source", "center_dett"] as const;

export type ScopeParameter = (typeof SCOPE_PARAMETERS)[number];

function shown(value: unknown): string {
  return (typeof value === "string" ? value : (JSON.stringify(value) ?? String(value))).slice(0, 60);
}

/**
 * 400 INVALID_PARAMETER when the query string and `given` (a JSON body, a form's parts, said by
 * `where`) give `source` (or `center_dett`) differently.
 */
function checkAgreement(request: FastifyRequest, given: object, where: string): void {
  const query = (request.query ?? {}) as Record<string, unknown>;
  for (const name of SCOPE_PARAMETERS) {
    const inQuery = query[name];
    // Absent, empty or repeated in the query string: the context decides (the body, or a 400).
    if (typeof inQuery !== "string" || inQuery === "" || !Object.hasOwn(given, name)) continue;
    const inBody = (given as Record<string, unknown>)[name];
    if (inBody === undefined || inBody === null || inBody === "" || inBody === inQuery) continue;
    throw new BadRequestError(
      "INVALID_PARAMETER",
      `${name} is given twice with different values: '${shown(inQuery)}' in the query string, '${shown(inBody)}' ${where}. Give it once, or the same in both.`,
      { field: name },
    );
  }
}

/** 400 INVALID_PARAMETER when the query string and the JSON body give `source` (or `center_dett`) differently. */
export function checkScopeAgreement(request: FastifyRequest): void {
  const body = request.body;
  if (body === null || typeof body !== "object" || Array.isArray(body)) return;
  checkAgreement(request, body, "in the body");
}

/** The call's context (contextOf), once its query string and body agree on the scope. */
export function agreedContextOf(request: FastifyRequest): RequestContext {
  checkScopeAgreement(request);
  return contextOf(request);
}

/**
 * The context of a multipart call (an upload), whose scope may also come in the form's parts
 * `source` and `center_dett`, read like a JSON write body's members: the query string's value,
 * else the part's; given in both, they must agree (400 INVALID_PARAMETER naming it).
 */
export function formContextOf(
  request: FastifyRequest,
  parts: Readonly<Partial<Record<ScopeParameter, string>>>,
): RequestContext {
  checkAgreement(request, parts, "in the form part");
  const query = scopeOf(request);
  const part = (name: ScopeParameter) => (parts[name] ? parts[name] : null);
  return inScope(callerOf(request), query.source ?? part("source"), query.centerDett ?? part("center_dett"));
}
