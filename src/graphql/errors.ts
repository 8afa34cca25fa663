// GraphQL's errors as the client sees them: one masking function for every transport (the chain's
// masked-errors plugin and yoga's transport-level errors), and the service's errors in GraphQL's
// shape with the REST code and status (docs/decisions.md; spec graphql.md "Errors and limits").
import { GraphQLError } from "graphql";
import { ApiError } from "../errors.ts";
import { mapError } from "../http/error-handler.ts";

/** The status of GraphQL's and yoga's own codes (their errors carry a code, not always a status). */
const STATUS_OF_CODE: Readonly<Record<string, number>> = {
  GRAPHQL_PARSE_FAILED: 400,
  GRAPHQL_VALIDATION_FAILED: 400,
  BAD_USER_INPUT: 400,
  BAD_REQUEST: 400,
  OPERATION_RESOLUTION_FAILURE: 400,
};

/**
 * `error` with `extensions.code` and `extensions.status`, which every error carries (spec
 * graphql.md, "Errors and limits"): GraphQL's own errors have a code at most (a document that does
 * not parse or validate) or none (variables that do not coerce: BAD_USER_INPUT, as yoga's
 * interpreter codes them). `phaseCode` is the code of an error without one where its phase says it (a
 * document that does not parse or validate: yoga's GRAPHQL_PARSE_FAILED, GRAPHQL_VALIDATION_FAILED);
 * otherwise, without a code, an error before any field ran (no path) is the request's, one at a
 * field the service's. The status is the one the error's HTTP answer has, else its code's. The
 * one place both are set: a new error when one is missing (the error itself is never changed, as
 * it may be kept and shared: a cached validation result, graphql-js's own abort error), the same
 * error when it has both.
 */
export function withCodeAndStatus(error: GraphQLError, phaseCode?: string): GraphQLError {
  const ext = error.extensions ?? {};
  if (typeof ext.code === "string" && typeof ext.status === "number") return error;
  const code =
    typeof ext.code === "string"
      ? ext.code
      : (phaseCode ?? (error.path ? "INTERNAL_ERROR" : "BAD_USER_INPUT"));
  const http = (ext.http as { status?: unknown } | undefined)?.status;
  const status =
    typeof ext.status === "number"
      ? ext.status
      : typeof http === "number"
        ? http
        : (STATUS_OF_CODE[code] ?? (error.path ? 500 : 400));
  return new GraphQLError(error.message, {
    nodes: error.nodes,
    source: error.source,
    positions: error.positions,
    path: error.path,
    originalError: error.originalError,
    extensions: { ...ext, code, status },
  });
}

/** An error thrown by a resolver (or the database under it) as GraphQL error extensions. */
function toGraphQLError(error: GraphQLError, log: (err: unknown) => void): GraphQLError {
  let original: unknown = error.originalError;
  while (original instanceof GraphQLError && original.originalError) original = original.originalError;
  if (original === undefined || original instanceof GraphQLError) return withCodeAndStatus(error);
  const mapped = mapError(original);
  if (mapped.status >= 500 && !(original instanceof ApiError)) log(original);
  const { error: _type, message, code, status, ...extras } = mapped.body;
  return new GraphQLError(
    mapped.status >= 500 && !(original instanceof ApiError) ? "Unexpected error." : message,
    {
      nodes: error.nodes,
      path: error.path,
      extensions: { code, status, ...extras },
    },
  );
}

/**
 * The masking of every GraphQL error: a service error becomes its code, status and message; an
 * unexpected one "Unexpected error." (logged with `log`); GraphQL's own errors pass unchanged.
 * Idempotent: a masked error passes again unchanged.
 */
export function createMaskError(log: (err: unknown) => void): (error: unknown) => Error {
  return (error) => {
    if (error instanceof GraphQLError) return toGraphQLError(error, log);
    // Not GraphQL's nor the service's: a fault of the transport or of code around it. Logged, and
    // answered with the status it says (yoga would answer 200 for an error without one).
    log(error);
    return new GraphQLError("Unexpected error.", {
      extensions: { code: "INTERNAL_ERROR", status: 500, http: { status: 500 } },
    });
  };
}

/** An error the service raised, as a GraphQL error with the REST code and status. */
export function asGraphQLError(err: unknown): GraphQLError {
  if (err instanceof GraphQLError) return err;
  const { error: _type, message, code, status, ...extras } = mapError(err).body;
  return new GraphQLError(message, { extensions: { code, status, ...extras } });
}
