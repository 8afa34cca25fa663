// GraphQL's errors as the client sees them: one masking function for every transport (the chain's
// masked-errors plugin and yoga's transport-level errors), and the service's errors in GraphQL's
// shape with the REST code and status (docs/decisions.md; spec graphql.md "Errors and limits").
import { GraphQLError } from "graphql";
import { ApiError } from "../errors.ts";
import { mapError } from "../http/error-handler.ts";

/** An error thrown by a resolver (or the database under it) as GraphQL error extensions. */
function toGraphQLError(error: GraphQLError, log: (err: unknown) => void): GraphQLError {
  let original: unknown = error.originalError;
  while (original instanceof GraphQLError && original.originalError) original = original.originalError;
  if (original === undefined || original instanceof GraphQLError) return error;
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
