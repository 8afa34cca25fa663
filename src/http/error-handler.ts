// Maps every error to the standard body of spec 7.2, once, for all HTTP routes.
import type { FastifyError, FastifyReply, FastifyRequest } from "fastify";
import { ApiError, type ErrorBody, internalErrorBody } from "../errors.ts";

export interface MappedError {
  status: number;
  body: ErrorBody;
  headers?: Record<string, string>;
}

/** 4xx statuses of the framework (or a library) that keep their status; any other 4xx is a 400. */
const OTHER_CLIENT_ERRORS: Record<number, { error: string; code: string }> = {
  404: { error: "NotFound", code: "NOT_FOUND" },
  405: { error: "MethodNotAllowed", code: "METHOD_NOT_ALLOWED" },
  406: { error: "NotAcceptable", code: "NOT_ACCEPTABLE" },
  408: { error: "RequestTimeout", code: "REQUEST_TIMEOUT" },
  429: { error: "RateLimitExceeded", code: "RATE_LIMIT_EXCEEDED" },
  431: { error: "HeadersTooLarge", code: "HEADERS_TOO_LARGE" },
};

function fastifyClientError(err: FastifyError): MappedError | null {
  const status = err.statusCode;
  if (!status || status < 400 || status >= 500) return null;
  if (status === 413)
    return {
      status,
      body: {
        error: "PayloadTooLarge",
        message: "The request body is too large.",
        code: "PAYLOAD_TOO_LARGE",
        status,
      },
    };
  if (status === 415)
    return {
      status,
      body: {
        error: "UnsupportedMediaType",
        message: `Unsupported Content-Type; send application/json.`,
        code: "UNSUPPORTED_MEDIA_TYPE",
        status,
      },
    };
  const other = OTHER_CLIENT_ERRORS[status];
  if (other)
    return {
      status,
      body: { error: other.error, message: err.message || other.error, code: other.code, status },
    };
  const invalidJson = err.code?.startsWith("FST_ERR_CTP") || err instanceof SyntaxError;
  return {
    status: 400,
    body: {
      error: "BadRequest",
      message: invalidJson ? `The request body is not valid JSON: ${err.message}` : err.message,
      code: invalidJson ? "INVALID_JSON" : "INVALID_REQUEST",
      status: 400,
    },
  };
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
]);

/**
 * Database errors that escaped the layers that know better: bad values are a 400, conflicts a
 * 409, an unreachable or restarting database a 503 the client may retry, a statement over the
 * query timeout (spec 8: 30 s) a 504.
 */
function databaseError(err: unknown): MappedError | null {
  const code = (err as { code?: unknown })?.code;
  if (typeof code !== "string") return null;
  if (code === "57014") {
    const body = {
      error: "GatewayTimeout",
      message: "The query took longer than the query timeout and was cancelled.",
      code: "QUERY_TIMEOUT",
      status: 504,
    };
    return { status: 504, body };
  }
  // Data exceptions (class 22: a NUL or an unpaired surrogate in text, a value out of range) and
  // integrity violations come from what the request sent: the request's fault, never a 500.
  if (code.startsWith("22")) {
    const body = {
      error: "ValidationError",
      message: "A value in the request cannot be stored or compared (for example a NUL character).",
      code: "INVALID_FIELD_VALUE",
      status: 400,
      details: { sqlstate: code },
    };
    return { status: 400, body };
  }
  if (code.startsWith("23")) {
    const duplicate = code === "23505";
    const body = {
      error: "Conflict",
      message: duplicate
        ? "A record with this key exists already."
        : "The change conflicts with stored data.",
      code: duplicate ? "DUPLICATE_KEY" : "CONSTRAINT_VIOLATION",
      status: 409,
      details: { sqlstate: code },
    };
    return { status: 409, body };
  }
  // Two transactions waited on each other (or serialization failed): nothing was written; a retry
  // will most likely pass.
  if (code === "40P01" || code === "40001") {
    const body = {
      error: "Conflict",
      message: "The change collided with a concurrent one and was not applied; retry it.",
      code: "WRITE_CONFLICT",
      status: 409,
    };
    return { status: 409, body, headers: { "Retry-After": "1" } };
  }
  // The SQL is generated from the metadata, so an unknown column or table means the metadata
  // changed under a request in flight (another process, or a change landing): retry shortly.
  if (code === "42703" || code === "42P01") {
    const body = {
      error: "ServiceUnavailable",
      message: "The dimension's metadata changed while the request ran; retry it.",
      code: "METADATA_CHANGED",
      status: 503,
    };
    return { status: 503, body, headers: { "Retry-After": "1" } };
  }
  if (UNAVAILABLE.has(code) || code.startsWith("08")) {
    const body = {
      error: "ServiceUnavailable",
      message: "The database is not reachable right now; retry shortly.",
      code: "DATABASE_UNAVAILABLE",
      status: 503,
    };
    return { status: 503, body, headers: { "Retry-After": "1" } };
  }
  return null;
}

export function mapError(err: unknown, requestId?: string): MappedError {
  if (err instanceof ApiError) {
    return { status: err.status, body: err.toBody(), ...(err.headers ? { headers: err.headers } : {}) };
  }
  const db = databaseError(err);
  if (db) return db;
  const fe = err as FastifyError;
  if (fe && typeof fe === "object" && typeof fe.statusCode === "number") {
    const mapped = fastifyClientError(fe);
    if (mapped) return mapped;
  }
  return { status: 500, body: internalErrorBody(requestId) };
}

export function errorHandler(err: unknown, request: FastifyRequest, reply: FastifyReply) {
  const mapped = mapError(err, request.id);
  if (mapped.status >= 500) request.log.error({ err }, "request failed");
  else request.log.info({ code: mapped.body.code, status: mapped.status }, "request refused");
  if (mapped.headers) reply.headers(mapped.headers);
  return reply.status(mapped.status).send(mapped.body);
}

export function notFoundHandler(request: FastifyRequest, reply: FastifyReply) {
  return reply.status(404).send({
    error: "NotFound",
    message: `No route for ${request.method} ${request.url.split("?")[0]}`,
    code: "NOT_FOUND",
    status: 404,
  } satisfies ErrorBody);
}
