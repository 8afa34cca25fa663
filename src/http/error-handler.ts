// Maps every error to the standard body of spec 7.2, once, for all HTTP routes.
import { randomUUID } from "node:crypto";
import { STATUS_CODES } from "node:http";
import type { Socket } from "node:net";
import type { FastifyError, FastifyReply, FastifyRequest } from "fastify";
import { databaseApiError } from "../db/errors.ts";
import { ApiError, BODY_TOO_LARGE_ADVICE, type ErrorBody, internalErrorBody } from "../errors.ts";

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

/** The route's limit on a body's bytes, when the framework refused one past it (413). */
export interface RouteLimits {
  bodyLimit?: number;
}

function fastifyClientError(err: FastifyError, limits: RouteLimits): MappedError | null {
  const status = err.statusCode;
  if (!status || status < 400 || status >= 500) return null;
  if (status === 413)
    return {
      status,
      body: {
        error: "PayloadTooLarge",
        message:
          limits.bodyLimit === undefined
            ? `The request body is too large: ${BODY_TOO_LARGE_ADVICE}.`
            : `The request body is over ${limits.bodyLimit} bytes, the most this route takes: ${BODY_TOO_LARGE_ADVICE}.`,
        code: "PAYLOAD_TOO_LARGE",
        status,
        ...(limits.bodyLimit === undefined ? {} : { details: { max_bytes: limits.bodyLimit } }),
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

export function mapError(err: unknown, requestId?: string, limits: RouteLimits = {}): MappedError {
  if (err instanceof ApiError) {
    return { status: err.status, body: err.toBody(), ...(err.headers ? { headers: err.headers } : {}) };
  }
  const db = databaseApiError(err);
  if (db) return { status: db.status, body: db.toBody(), ...(db.headers ? { headers: db.headers } : {}) };
  const fe = err as FastifyError;
  if (fe && typeof fe === "object" && typeof fe.statusCode === "number") {
    const mapped = fastifyClientError(fe, limits);
    if (mapped) return mapped;
  }
  return { status: 500, body: internalErrorBody(requestId) };
}

/** Errors of a connection the client closed: its request body cut off, its socket reset or gone. */
const ABORT_CODES: ReadonlySet<string> = new Set([
  "ECONNRESET",
  "ECONNABORTED",
  "EPIPE",
  "ERR_STREAM_PREMATURE_CLOSE",
  "ERR_STREAM_DESTROYED",
]);

/**
 * Whether `err` is the client's own going away: an abort-like error while the request's socket is
 * closed. (A database connection reset while the client still waits is no such thing: 503.)
 */
export function clientAborted(err: unknown, request: FastifyRequest): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  const socket = request.raw.socket as Socket | null | undefined;
  const gone = !socket || socket.destroyed || request.raw.aborted === true;
  return gone && typeof code === "string" && ABORT_CODES.has(code);
}

/**
 * A body refused from its length before it was read: the connection closes after the answer, so
 * the client stops sending it (keeping the connection would read and drop the whole body).
 */
export function closeIfUnread(err: unknown, reply: FastifyReply): void {
  if ((err as { code?: unknown } | null)?.code === "FST_ERR_CTP_BODY_TOO_LARGE")
    reply.header("connection", "close");
}

export function errorHandler(err: unknown, request: FastifyRequest, reply: FastifyReply) {
  if (clientAborted(err, request)) {
    // Nothing went wrong here, and nobody reads the answer: info, not error (issue 35 §6).
    request.log.info({ code: (err as { code: string }).code }, "client closed the request");
    return reply.status(400).send({
      error: "BadRequest",
      message: "The client closed the request before it was complete.",
      code: "REQUEST_ABORTED",
      status: 400,
    } satisfies ErrorBody);
  }
  const mapped = mapError(err, request.id, { bodyLimit: request.routeOptions.bodyLimit });
  closeIfUnread(err, reply);
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

/** Node's parser errors, before any request exists: status, error and code of the body. */
function clientErrorKind(err: NodeJS.ErrnoException): {
  status: number;
  error: string;
  code: string;
  message: string;
} {
  if (err.code === "ERR_HTTP_REQUEST_TIMEOUT")
    return {
      status: 408,
      error: "RequestTimeout",
      code: "REQUEST_TIMEOUT",
      message: "The request did not arrive completely in time.",
    };
  if (err.code === "HPE_HEADER_OVERFLOW")
    return {
      status: 431,
      error: "HeadersTooLarge",
      code: "HEADERS_TOO_LARGE",
      message: "The URL and headers together exceed 16 KB.",
    };
  return {
    status: 400,
    error: "BadRequest",
    code: "INVALID_REQUEST",
    message: "The request is not valid HTTP.",
  };
}

/** Fastify's clientErrorHandler: the standard body, written on the raw socket, then closed. */
export function clientErrorResponse(err: NodeJS.ErrnoException, socket: Socket): void {
  if (err.code === "ECONNRESET" || socket.destroyed) return;
  const kind = clientErrorKind(err);
  const body = JSON.stringify({
    error: kind.error,
    message: kind.message,
    code: kind.code,
    status: kind.status,
  } satisfies ErrorBody);
  if (socket.writable) {
    socket.end(
      `HTTP/1.1 ${kind.status} ${STATUS_CODES[kind.status]}\r\n` +
        `Content-Type: application/json; charset=utf-8\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\n` +
        `X-Request-ID: ${randomUUID()}\r\n` +
        `Connection: close\r\n\r\n${body}`,
    );
  }
  // The answer is flushed by end(); a client that keeps sending is cut off shortly after.
  setTimeout(() => socket.destroy(), 1000).unref();
}
