// Typed errors. Every module throws these; src/http/error-handler.ts and the GraphQL layer map
// them to responses once. `toErrorBody` gives the standard body of spec 7.2.

export interface FieldError {
  field: string;
  message: string;
  code?: string;
}

export interface ErrorBody {
  error: string;
  message: string;
  code: string;
  status: number;
  field?: string;
  details?: Record<string, unknown>;
  errors?: FieldError[];
  [extra: string]: unknown;
}

export interface ApiErrorOptions {
  field?: string;
  details?: Record<string, unknown>;
  errors?: FieldError[];
  /** Members added to the body top-level (required_grant, retry_after, expired_at...). */
  extra?: Record<string, unknown>;
  headers?: Record<string, string>;
  cause?: unknown;
}

export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly errorType: string;
  readonly field: string | undefined;
  readonly details: Record<string, unknown> | undefined;
  readonly errors: FieldError[] | undefined;
  readonly extra: Record<string, unknown> | undefined;
  readonly headers: Record<string, string> | undefined;

  constructor(status: number, code: string, errorType: string, message: string, opts: ApiErrorOptions = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = errorType;
    this.status = status;
    this.code = code;
    this.errorType = errorType;
    this.field = opts.field;
    this.details = opts.details;
    this.errors = opts.errors;
    this.extra = opts.extra;
    this.headers = opts.headers;
  }

  toBody(): ErrorBody {
    const body: ErrorBody = {
      error: this.errorType,
      message: this.message,
      code: this.code,
      status: this.status,
    };
    if (this.field !== undefined) body.field = this.field;
    if (this.details !== undefined) body.details = this.details;
    if (this.errors !== undefined) body.errors = this.errors;
    if (this.extra) Object.assign(body, this.extra);
    return body;
  }
}

export class ValidationError extends ApiError {
  constructor(code: string, message: string, opts: ApiErrorOptions = {}, status = 400) {
    super(status, code, "ValidationError", message, opts);
  }
}

export class BadRequestError extends ApiError {
  constructor(code: string, message: string, opts: ApiErrorOptions = {}) {
    super(400, code, "BadRequest", message, opts);
  }
}

export class NotFoundError extends ApiError {
  constructor(code: string, message: string, opts: ApiErrorOptions = {}) {
    super(404, code, "NotFound", message, opts);
  }
}

export class AuthenticationError extends ApiError {
  constructor(code: string, message: string, opts: ApiErrorOptions = {}) {
    super(401, code, "AuthenticationError", message, opts);
  }
}

export class PermissionDeniedError extends ApiError {
  constructor(message: string, opts: ApiErrorOptions = {}) {
    super(403, "INSUFFICIENT_PERMISSIONS", "PermissionDenied", message, opts);
  }
}

/**
 * 403 ROW_NOT_ALLOWED (decisions.md §17): a create or update whose resulting row the caller's row
 * scope or ROW_FILTER would not let it see; nothing is written.
 */
export class RowNotAllowedError extends ApiError {
  constructor(message: string, opts: ApiErrorOptions = {}) {
    super(403, "ROW_NOT_ALLOWED", "PermissionDenied", message, opts);
  }
}

export class RateLimitError extends ApiError {
  constructor(message: string, opts: ApiErrorOptions = {}) {
    super(429, "RATE_LIMIT_EXCEEDED", "RateLimitExceeded", message, opts);
  }
}

export class ConflictError extends ApiError {
  constructor(code: string, message: string, opts: ApiErrorOptions = {}) {
    super(409, code, "Conflict", message, opts);
  }
}

/** A transaction that ran past its deadline (spec 8's 30 s, for writes as for reads). */
export class TransactionTimeoutError extends ApiError {
  constructor(timeoutMs: number) {
    super(
      504,
      "QUERY_TIMEOUT",
      "GatewayTimeout",
      `The request's database work took longer than ${timeoutMs} ms and was rolled back.`,
      { details: { timeout_ms: timeoutMs } },
    );
  }
}

/**
 * PostgreSQL did not answer the database watchdog's probe (src/db/watchdog.ts): statements are
 * refused until it answers again. Not an ApiError: src/db/errors.ts maps it, with the lost
 * connections, to 503 DATABASE_UNAVAILABLE.
 */
export class DatabaseNotAnsweringError extends Error {
  constructor(reason: string) {
    super(`The database is not answering (${reason}).`);
    this.name = "DatabaseNotAnsweringError";
  }
}

/**
 * 503: the media store (S3, or the local directory) failed or did not answer; nothing was stored
 * or served, and the request can be retried once it is back.
 */
export class MediaStoreUnavailableError extends ApiError {
  constructor(cause: unknown) {
    super(
      503,
      "MEDIA_STORE_UNAVAILABLE",
      "ServiceUnavailable",
      "The media store is unavailable; retry later.",
      { cause, headers: { "Retry-After": "5" } },
    );
  }
}

/**
 * What to do about a request body over its route's limit (413 PAYLOAD_TOO_LARGE). Bulk data goes
 * to the import endpoint (src/rest/transfer-routes.ts), which streams its body to disk.
 */
export const BODY_TOO_LARGE_ADVICE =
  "send less or split a batch into smaller requests; for bulk data use POST /api/v4/core/{dim}/import (CSV or NDJSON)";

/**
 * 413 for a request whose work would exceed a bound (records, bytes of events): the message names
 * the bound and what to do, `details` the bound's value (max_bytes, max_batch_size...).
 */
export class PayloadTooLargeError extends ApiError {
  constructor(message: string, details: Record<string, unknown>) {
    super(413, "PAYLOAD_TOO_LARGE", "PayloadTooLarge", message, { details });
  }
}

/** Metadata or a fixture that breaks the rules: every problem listed. */
export class MetadataError extends ApiError {
  /**
   * 400 INVALID_METADATA listing every problem; when every problem is of one kind with a code of
   * its own (RESERVED_NAME), that code. Each listed problem carries its code, if any.
   */
  constructor(message: string, problems: ReadonlyArray<{ path: string; message: string; code?: string }>) {
    const codes = new Set(problems.map((p) => p.code));
    const [only] = codes;
    super(400, codes.size === 1 && only ? only : "INVALID_METADATA", "ValidationError", message, {
      errors: problems.map((p) => ({
        field: p.path,
        message: p.message,
        ...(p.code ? { code: p.code } : {}),
      })),
    });
  }
}

/** A schema change that would lose data (dropping or narrowing a column that holds values). */
export class UnsafeSchemaChangeError extends ApiError {
  constructor(message: string, problems: ReadonlyArray<{ path: string; message: string }>) {
    super(409, "UNSAFE_SCHEMA_CHANGE", "Conflict", message, {
      errors: problems.map((p) => ({ field: p.path, message: p.message })),
    });
  }
}

export function internalErrorBody(requestId?: string): ErrorBody {
  return {
    error: "InternalError",
    message: requestId
      ? `An unexpected error occurred; quote request id ${requestId} when reporting it.`
      : "An unexpected error occurred.",
    code: "INTERNAL_ERROR",
    status: 500,
  };
}

/** GraphQL subscriptions (src/graphql/subscription-guard.ts): a cap per user, tenant or process. */
export class TooManySubscriptionsError extends ApiError {
  constructor(scope: "user" | "tenant" | "process", max: number) {
    super(
      429,
      "TOO_MANY_SUBSCRIPTIONS",
      "RateLimitExceeded",
      scope === "user"
        ? `A user holds at most ${max} live subscriptions here; end one first.`
        : scope === "tenant"
          ? `A tenant holds at most ${max} live subscriptions here; end one first.`
          : `This server holds at most ${max} live subscriptions; try again later.`,
      { details: { [`max_per_${scope}`]: max } },
    );
  }
}

export class GrantsChangedError extends ApiError {
  constructor() {
    super(
      403,
      "GRANTS_CHANGED",
      "Forbidden",
      "The user's grants changed since the subscription started; subscribe again.",
    );
  }
}
