// A GraphQL request's parameters (query, variables, operationName, extensions) checked the same way
// whatever carries them, before yoga or the chain read them:
//   - a POST's body must be a JSON object with a `query` string, or a persisted operation's
//     `extensions.persistedQuery` or `documentId` (400 BAD_REQUEST otherwise: a body of `{}`,
//     `null`, `42`, `[]`, or without a document, never reaches yoga, which would answer some of
//     them 200 or with its parser's internal error);
//   - a GET's `variables` and `extensions` must be JSON (400 INVALID_JSON, not an unexpected error);
//   - the parameters nest at most MAX_JSON_DEPTH levels (400 INVALID_JSON) on every transport: a
//     POST's body is bounded by the JSON parser (src/http/server.ts), a GET's parameters here as the
//     object they make (their variables one level under it, as in a body), a WebSocket `subscribe`'s
//     payload by the same measure (src/graphql/websocket.ts). Deeper values would overflow the stack
//     of the recursive code after them (coercion, resolvers, JSON.stringify): the check is iterative.
import type { FastifyRequest } from "fastify";
import { BadRequestError } from "../errors.ts";
import { exceedsDepth, MAX_JSON_DEPTH } from "../json-depth.ts";

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

const notARequest = (what: string) => new BadRequestError("BAD_REQUEST", what);

const NOT_A_BODY =
  "The request body must be a JSON object with a `query` string (the GraphQL document), or a `documentId` or `extensions.persistedQuery` naming a persisted operation.";
const NO_DOCUMENT =
  "A GraphQL GET names its document in the `query` parameter, or a persisted operation in the `documentId` parameter or `extensions.persistedQuery`.";

/** 400 INVALID_JSON for parameters nested deeper than a JSON body may be; `where` says which. */
export function nestedTooDeep(where: string): BadRequestError {
  return new BadRequestError(
    "INVALID_JSON",
    `The request's parameters are nested deeper than ${MAX_JSON_DEPTH} levels (${where}).`,
  );
}

/** Whether a request's parameters object (a body, a WebSocket payload) nests deeper than a JSON body may. */
export function paramsTooDeep(params: unknown): boolean {
  return exceedsDepth(params, MAX_JSON_DEPTH);
}

/**
 * Names a persisted operation: `extensions.persistedQuery` or a `documentId` given (persisted.ts
 * checks their shape).
 */
function namesPersisted(extensions: unknown, documentId: unknown): boolean {
  return (
    (isPlainObject(extensions) && extensions.persistedQuery !== undefined) ||
    (documentId !== undefined && documentId !== null)
  );
}

/** A GET parameter as yoga reads it (Fastify's parsed query string: a repeated one is an array). */
function parameter(query: unknown, name: string): string | undefined {
  if (!isPlainObject(query)) return undefined;
  const value = query[name];
  if (value === undefined) return undefined;
  return Array.isArray(value) ? value.join(",") : String(value);
}

/** A GET's JSON parameter, parsed; undefined when absent or empty (as yoga takes it). */
function jsonParameter(query: unknown, name: "variables" | "extensions"): unknown {
  const text = parameter(query, name);
  if (!text) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new BadRequestError(
      "INVALID_JSON",
      `The \`${name}\` parameter is not valid JSON: ${(err as Error).message}`,
    );
  }
  // One level under the parameters' object, as in a body.
  if (exceedsDepth(value, MAX_JSON_DEPTH - 1))
    throw nestedTooDeep(`the \`${name}\` parameter one level under them, as in a JSON body`);
  return value;
}

/**
 * Throws the 400 of an HTTP GraphQL request (GET or POST) whose parameters are not a GraphQL
 * request's; returns for any other, which yoga answers. Called for what the plain POST leaves.
 */
export function checkHttpParams(request: FastifyRequest): void {
  if (request.method === "GET") {
    jsonParameter(request.query, "variables");
    const extensions = jsonParameter(request.query, "extensions");
    if (
      !parameter(request.query, "query") &&
      // An empty parameter is none, as yoga takes its others.
      !namesPersisted(extensions, parameter(request.query, "documentId") || undefined)
    )
      throw notARequest(NO_DOCUMENT);
    return;
  }
  if (request.method !== "POST") return;
  const body = request.body;
  if (!isPlainObject(body)) throw notARequest(NOT_A_BODY);
  const { query, extensions, documentId } = body;
  if (typeof query === "string") return;
  if ((query === undefined || query === null) && namesPersisted(extensions, documentId)) return;
  throw notARequest(NOT_A_BODY);
}
