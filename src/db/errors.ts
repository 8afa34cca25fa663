// Database failures mapped to typed API errors, once, by SQLSTATE (issue 9): REST's error handler
// and GraphQL's error formatting both call databaseApiError.
import { ApiError, DatabaseNotAnsweringError } from "../errors.ts";

/**
 * Whether the server itself answered with this error (it carries a SQLSTATE, five characters; a
 * socket's error code such as ECONNRESET is not one): the server is there, and a statement it
 * refused did not run.
 */
export function answeredByServer(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "string" && /^[0-9A-Z]{5}$/.test(code);
}

/** Socket errors and SQLSTATEs that mean the database cannot be reached or is going away. */
const UNAVAILABLE = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "57P01",
  "57P02",
  "57P03",
  "53300",
  // Prisma's codes for the same (its own pool, src/db/prisma.ts): cannot reach, timed out, closed.
  "P1001",
  "P1002",
  "P1008",
  "P1017",
]);

/**
 * What pg (and Prisma over it) says, without a code, when a connection breaks under a request, a
 * connection cannot be had within the pool's connect timeout, or the pool is closing.
 */
const LOST_CONNECTION_MESSAGES = [
  "Connection terminated",
  "timeout exceeded when trying to connect",
  "Query read timeout",
  "is not queryable",
  "Cannot use a pool after calling end on the pool",
];

/**
 * True for an error that says the database cannot be reached right now (a refused or broken
 * connection, a connect timeout, the watchdog's verdict): the request is answered 503 DATABASE_UNAVAILABLE, and the
 * readiness probe reports it. The error's causes are looked through (Prisma wraps pg's).
 */
export function isDatabaseUnavailable(err: unknown): boolean {
  for (let e = err, depth = 0; e && typeof e === "object" && depth < 5; depth++) {
    if (e instanceof DatabaseNotAnsweringError) return true;
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && (UNAVAILABLE.has(code) || code.startsWith("08"))) return true;
    const message = (e as { message?: unknown }).message;
    if (typeof message === "string" && LOST_CONNECTION_MESSAGES.some((m) => message.includes(m))) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

/** Seconds a client waits before retrying a 503 of an unreachable database. */
export const DATABASE_RETRY_AFTER_S = 1;

/**
 * The database profile (decisions.md §18) whose handle an error came from, kept by
 * tagDatabaseProfile (src/db/profiles.ts tags the errors of each profile's handle).
 */
const profileOfError = new WeakMap<object, string>();

/** Marks `err` as an error of database profile `profile`'s handle (the first mark stays). */
export function tagDatabaseProfile(err: unknown, profile: string): void {
  if (err && typeof err === "object" && !profileOfError.has(err)) profileOfError.set(err, profile);
}

/** The profile an error (or one of its causes) was tagged with; null: the main database's, or unknown. */
export function databaseProfileOf(err: unknown): string | null {
  for (let e = err, depth = 0; e && typeof e === "object" && depth < 5; depth++) {
    const profile = profileOfError.get(e);
    if (profile !== undefined) return profile;
    e = (e as { cause?: unknown }).cause;
  }
  return null;
}

/**
 * The 503 of an unreachable database (spec 7.2's body; Retry-After in seconds). With `profile`,
 * the database of a tenant on that profile: the body says it is the tenant's and names the
 * profile (details.profile), as at start-up; the other tenants are served meanwhile.
 */
export function databaseUnavailableError(cause?: unknown, profile?: string | null): ApiError {
  return new ApiError(
    503,
    "DATABASE_UNAVAILABLE",
    "ServiceUnavailable",
    profile
      ? `The tenant's database (profile ${profile}) is not reachable right now; retry shortly.`
      : "The database is not reachable right now; retry shortly.",
    {
      headers: { "Retry-After": String(DATABASE_RETRY_AFTER_S) },
      ...(profile ? { details: { profile } } : {}),
      ...(cause === undefined ? {} : { cause }),
    },
  );
}

interface DatabaseErrorRule {
  matches(code: string, message: string): boolean;
  status: number;
  error: string;
  code: string | ((sqlstate: string) => string);
  message: string | ((sqlstate: string) => string);
  /** A transient failure: the answer carries Retry-After. */
  retry?: boolean;
  /** The request's own fault: the body names the SQLSTATE. */
  showState?: boolean;
}

/**
 * Database errors that escaped the layers that know better, first match wins. Bad values (class
 * 22: a NUL or an unpaired surrogate in text, a value out of range) are the request's fault, and so
 * are integrity violations (class 23). A deadlock wrote nothing and a retry will most likely pass.
 * The SQL is generated from the metadata, so an unknown column or table means the metadata changed
 * under a request in flight. An unreachable database is a 503, a query over the timeout (spec 8) a 504.
 */
const DATABASE_ERRORS: DatabaseErrorRule[] = [
  {
    matches: (c) => c === "57014",
    status: 504,
    error: "GatewayTimeout",
    code: "QUERY_TIMEOUT",
    message: "The query took longer than the query timeout and was cancelled.",
  },
  {
    matches: (c) => c.startsWith("22"),
    status: 400,
    error: "ValidationError",
    code: "INVALID_FIELD_VALUE",
    message: "A value in the request cannot be stored or compared (for example a NUL character).",
    showState: true,
  },
  {
    matches: (c) => c === "23502",
    status: 422,
    error: "ValidationError",
    code: "REQUIRED_FIELD_MISSING",
    message: "A required value is missing.",
    showState: true,
  },
  {
    matches: (c) => c.startsWith("23"),
    status: 409,
    error: "Conflict",
    code: (c) => (c === "23505" ? "DUPLICATE_KEY" : "CONSTRAINT_VIOLATION"),
    message: (c) =>
      c === "23505" ? "A record with this key exists already." : "The change conflicts with stored data.",
    showState: true,
  },
  {
    matches: (c) => c === "40P01" || c === "40001",
    status: 409,
    error: "Conflict",
    code: "WRITE_CONFLICT",
    message: "The change collided with a concurrent one and was not applied; retry it.",
    retry: true,
  },
  {
    // A prepared plan whose result type a table change altered is the same drift.
    matches: (c, m) => c === "42703" || c === "42P01" || (c === "0A000" && m.includes("cached plan")),
    status: 503,
    error: "ServiceUnavailable",
    code: "METADATA_CHANGED",
    message: "The dimension's metadata changed while the request ran; retry it.",
    retry: true,
  },
];

/**
 * A database error as the typed API error it means, or null when it is not one (then it is a bug:
 * a 500). REST's error handler and GraphQL's error formatting both call this; nothing else maps
 * SQLSTATEs.
 */
export function databaseApiError(err: unknown): ApiError | null {
  if (err instanceof ApiError) return null;
  if (isDatabaseUnavailable(err)) return databaseUnavailableError(err, databaseProfileOf(err));
  const sqlstate = (err as { code?: unknown })?.code;
  if (typeof sqlstate !== "string") return null;
  const message = err instanceof Error ? err.message : "";
  const rule = DATABASE_ERRORS.find((r) => r.matches(sqlstate, message));
  if (!rule) return null;
  // pg names the column of a NOT NULL violation.
  const column = (err as { column?: unknown }).column;
  return new ApiError(
    rule.status,
    typeof rule.code === "function" ? rule.code(sqlstate) : rule.code,
    rule.error,
    typeof rule.message === "function" ? rule.message(sqlstate) : rule.message,
    {
      ...(rule.showState && typeof column === "string" ? { field: column } : {}),
      ...(rule.showState ? { details: { sqlstate } } : {}),
      ...(rule.retry ? { headers: { "Retry-After": "1" } } : {}),
      cause: err,
    },
  );
}
