// Export and import over REST (decisions §20): GET /api/v4/core/{dim}/export streams every row a
// list with the same parameters matches (CSV, NDJSON or a JSON array) at the client's pace, in its
// tenant's heavy lane until the body ends or the client goes away; POST /api/v4/core/{dim}/import
// receives a CSV or NDJSON body whole into a temporary file (src/rest/import-spool.ts), outside
// the lane (receiving uses neither the event loop nor the database), then takes its turn in its
// tenant's heavy lane and writes its rows from that file through the write pipeline. Both call
// resolvers (src/resolvers/read/export.ts, src/resolvers/write/import.ts); nothing is decided
// here but the media types, the parameters and the phases of an import.
import { Readable } from "node:stream";
import type { FastifyPluginAsync, FastifyRequest } from "fastify";
import { BadRequestError, ApiError } from "../errors.ts";
import { type HeavyRequests, httpLaneClient, type LaneClient } from "../http/heavy-requests.ts";
import { contextOf } from "../http/protected.ts";
import { type QueryParams, refuseReadParameters, refuseUnknownNames } from "../query/rest-params.ts";
import { createReadContext } from "../resolvers/read/index.ts";
import { exportQuery, exportRecords } from "../resolvers/read/export.ts";
import { authorizeImport, importRecords, type ImportMode } from "../resolvers/write/import.ts";
import type { RouteDeps } from "./deps.ts";
import { IMPORT_MEDIA_TYPES, type ImportFormat, importRows } from "./import-body.ts";
import { createImportSpool, type SpooledBody, tooLarge } from "./import-spool.ts";
import {
  EXPORT_FORMATS,
  EXPORT_MEDIA_TYPES,
  type ExportFormat,
  exportChunks,
} from "./response/export-formats.ts";

type DimParams = { Params: { dim: string } };

function unsupported(name: string, message: string): never {
  throw new BadRequestError("INVALID_PARAMETER", message, { field: name });
}

/** One string parameter (or undefined), refusing repeats. */
function one(query: QueryParams, name: string): string | undefined {
  const v = query[name];
  if (v === undefined) return undefined;
  if (typeof v !== "string") unsupported(name, `${name} may be given only once.`);
  return v;
}

function formatOf(query: QueryParams): ExportFormat {
  const format = (one(query, "format") ?? "csv").toLowerCase();
  if (!(EXPORT_FORMATS as readonly string[]).includes(format))
    unsupported("format", `format is ${EXPORT_FORMATS.join(", ")}; got '${format.slice(0, 20)}'.`);
  return format as ExportFormat;
}

function flagOf(query: QueryParams, name: string): boolean {
  const v = one(query, name);
  if (v === undefined || v === "false" || v === "0") return false;
  if (v === "true" || v === "1" || v === "") return true;
  return unsupported(name, `${name} must be true or false.`);
}

function modeOf(query: QueryParams): ImportMode {
  const mode = one(query, "mode") ?? "create";
  if (mode !== "create" && mode !== "upsert") unsupported("mode", "mode is create or upsert.");
  return mode;
}

/** What an import's query string takes besides source and the context parameters. */
const IMPORT_PARAMETERS: ReadonlySet<string> = new Set(["mode", "atomic"]);

/**
 * An import reads `mode` and `atomic` alone: any other parameter (`dry_run`, a list's `filter[…]`,
 * `$num_rows`, `fields`, `format`) would be left unread while every row is written, so it is 400
 * INVALID_PARAMETER naming it, as on reads (src/query/rest-params.ts).
 */
function refuseOtherImportParameters(query: QueryParams): void {
  refuseReadParameters(
    query,
    IMPORT_PARAMETERS,
    (name) =>
      `${name} is a read parameter; an import writes every row of its body, and its query string takes only mode (create or upsert) and atomic, besides source and the context parameters.`,
  );
  refuseUnknownNames(query, IMPORT_PARAMETERS);
}

/** The import format of a request's media type: text/csv or application/x-ndjson, UTF-8. */
function importFormatOf(request: FastifyRequest): ImportFormat {
  const header = request.headers["content-type"] ?? "";
  const [essence = "", ...params] = header.split(";").map((s) => s.trim().toLowerCase());
  const charset = params
    .find((p) => p.startsWith("charset="))
    ?.slice(8)
    .replace(/"/g, "");
  const known = (IMPORT_MEDIA_TYPES as readonly string[]).includes(essence);
  if (!known || (charset !== undefined && charset !== "utf-8" && charset !== "utf8")) {
    throw new ApiError(
      415,
      "UNSUPPORTED_MEDIA_TYPE",
      "UnsupportedMediaType",
      `An import body is text/csv (a header row of field codes) or application/x-ndjson, in UTF-8; got ${header ? `Content-Type ${header.slice(0, 80)}` : "no Content-Type"}.`,
      { details: { accepted: [...IMPORT_MEDIA_TYPES] } },
    );
  }
  return essence === "text/csv" ? "csv" : "ndjson";
}

/**
 * 503 IMPORT_TURN_TIMEOUT: the body was received, but the tenant's heavy lane gave the import no
 * turn before IMPORT_WRITE_TIMEOUT_MS (counted from the body's arrival) had passed.
 */
function turnTimeout(timeoutMs: number): ApiError {
  return new ApiError(
    503,
    "IMPORT_TURN_TIMEOUT",
    "ServiceUnavailable",
    `The import's body was received, but it waited IMPORT_WRITE_TIMEOUT_MS (${timeoutMs} ms) for its turn behind this tenant's other heavy requests (imports, exports) without getting one; nothing was written. Retry once they are done.`,
    {
      details: { timeout_ms: timeoutMs, received: 0, created: 0, updated: 0, unchanged: 0, failed: 0 },
      headers: { "Retry-After": String(TURN_RETRY_S) },
    },
  );
}

/** Seconds a client is asked to wait when no turn came: the imports ahead take seconds to minutes. */
const TURN_RETRY_S = 30;

/**
 * Waits for the import's turn in its tenant's heavy lane, until `deadline` (performance.now()):
 * then 503 IMPORT_TURN_TIMEOUT. A client that goes away meanwhile leaves the queue, as any heavy
 * request's does: nothing of its body was written yet, and no one waits for its answer.
 */
async function importTurn(
  heavy: HeavyRequests,
  tenantId: string,
  client: LaneClient,
  deadline: number,
  timeoutMs: number,
): Promise<() => void> {
  const late = new AbortController();
  const timer = setTimeout(
    () => late.abort(turnTimeout(timeoutMs)),
    Math.max(0, Math.min(deadline - performance.now(), 2 ** 31 - 1)),
  );
  try {
    return await heavy.enter(tenantId, Number.POSITIVE_INFINITY, {
      gone: AbortSignal.any([client.gone, late.signal]),
    });
  } finally {
    clearTimeout(timer);
  }
}

/** 503 SERVICE_CLOSING: the server closes; an import stops receiving, or before its next batch. */
function serviceClosing(): ApiError {
  return new ApiError(
    503,
    "SERVICE_CLOSING",
    "ServiceUnavailable",
    "The service is shutting down; the import stopped.",
  );
}

export const transferRoutes: FastifyPluginAsync<RouteDeps> = async (app, { services, heavy, readGate }) => {
  // Import bodies reach the handler as the request's stream, unread (the import's own scope,
  // below): the import spools them to disk, then parses them as its rows are written.
  const spool = createImportSpool(services.config.importSpoolDir, {
    maxBytes: services.config.importSpoolMaxBytes,
  });
  // The server closing stops imports under way (receiving, or before their next batch) instead of
  // waiting up to IMPORT_WRITE_TIMEOUT_MS for them; once the server is closed, the spool's
  // directory goes with whatever is left in it.
  const closing = new AbortController();
  app.addHook("preClose", (done) => {
    closing.abort(serviceClosing());
    done();
  });
  app.addHook("onClose", async () => {
    await spool.close();
  });

  app.get<DimParams>("/api/v4/core/:dim/export", async (request, reply) => {
    const query = request.query as QueryParams;
    // The list's parameters, refused there what an export does not take (as by `npm run export`).
    const listQuery = exportQuery(Object.fromEntries(Object.entries(query).filter(([k]) => k !== "format")));
    const format = formatOf(query);
    const caller = contextOf(request);
    const rc = createReadContext(
      {
        db: readGate.queryable(
          services.forTenant(caller.principal.tenantId).readDb,
          caller.principal.tenantId,
        ),
        metadata: services.metadata,
        countBound: services.config.countExactLimit,
      },
      caller,
    );
    // Planned before the lane and the answer: a bad parameter is its standard error.
    const rows = exportRecords(rc, request.params.dim, listQuery);
    // Heavy whatever its size: in the tenant's lane until the body ends or the client goes away.
    const leave = await heavy.enter(
      caller.principal.tenantId,
      Number.POSITIVE_INFINITY,
      httpLaneClient(reply.raw),
    );
    reply.raw.once("close", leave);
    try {
      // The first chunk is read before the answer starts, so that a failing first statement is
      // still its standard error; later ones end the body early (the connection is cut).
      const chunks = exportChunks(format, rows.columns, rows.pages);
      const first = await chunks.next();
      const body = Readable.from(prepend(first, chunks), { objectMode: false, highWaterMark: 16 * 1024 });
      reply
        .type(EXPORT_MEDIA_TYPES[format])
        .header("content-disposition", `attachment; filename="${rows.dim}.${format}"`)
        .header("cache-control", "no-store");
      return reply.send(body);
    } catch (err) {
      leave();
      throw err;
    }
  });

  // Its own parsers only: any other media type (application/json, a spreadsheet's
  // application/vnd.ms-excel, none) reaches the handler too, whose 415 names the types it takes
  // rather than the scope's "send application/json". Bodyless requests (the export) parse nothing.
  app.register(async (imports) => {
    imports.removeAllContentTypeParsers();
    imports.addContentTypeParser([...IMPORT_MEDIA_TYPES], (_request, payload, done) => done(null, payload));
    imports.addContentTypeParser("*", (_request, payload, done) => done(null, payload));
    imports.post<DimParams>(
      "/api/v4/core/:dim/import",
      // The large body is not read in the tenant's lane (protectedScope): it goes to its file
      // outside it, and the lane is taken only to write its rows.
      { config: { ownsBodyLane: true } },
      async (request, reply) => {
        // No body at all (Content-Length: 0) reaches no parser: no rows.
        const body = request.body instanceof Readable ? request.body : Readable.from([]);
        const { importMaxBytes: max, importWriteTimeoutMs } = services.config;
        let spooled: SpooledBody | null = null;
        let leave = () => {};
        try {
          const query = request.query as QueryParams;
          refuseOtherImportParameters(query);
          const mode = modeOf(query);
          const atomic = flagOf(query, "atomic");
          const format = importFormatOf(request);
          const length = request.headers["content-length"];
          // Refused from its announced length before a byte is read (the connection then closes).
          if (length !== undefined && Number(length) > max) throw tooLarge(max);
          const ctx = contextOf(request);
          const options = { mode, atomic, writeTimeoutMs: importWriteTimeoutMs, signal: closing.signal };
          const tenant = services.forTenant(ctx.principal.tenantId);
          const target = await authorizeImport(tenant, ctx, request.params.dim, options);
          // Receiving: the whole body into its file, within REQUEST_TIMEOUT_MS (Node's server cuts
          // a request that has not fully arrived by then) and IMPORT_MAX_BYTES, before the turn:
          // a request waiting for its turn is no longer read (its body would wait in the socket,
          // and REQUEST_TIMEOUT_MS cut it as too slow), and a slow upload holding the lane would
          // hold every heavy request of its tenant behind it.
          spooled = await spool.receive(body, max, closing.signal);
          // From here IMPORT_WRITE_TIMEOUT_MS bounds the wait for the turn and the writing together
          // (the gateway waits REQUEST_TIMEOUT_MS + IMPORT_WRITE_TIMEOUT_MS for an import).
          const writeStartedAt = performance.now();
          leave = await importTurn(
            heavy,
            ctx.principal.tenantId,
            httpLaneClient(reply.raw),
            writeStartedAt + importWriteTimeoutMs,
            importWriteTimeoutMs,
          );
          // Writing, from the file: not bounded by the request timeout (which no longer runs once
          // the body is in). A client that goes away meanwhile does not stop it: its body was
          // received whole, and its rows are written as one that waited would have.
          const rows = importRows(spooled.open(), format);
          const result = await importRecords(tenant, ctx, target, rows, { ...options, writeStartedAt });
          return { data: result };
        } catch (err) {
          // The rest of a refused body is not read: the connection closes after the answer.
          if (!body.readableEnded) reply.header("connection", "close");
          throw err;
        } finally {
          await spooled?.remove();
          leave();
        }
      },
    );
  });
};

async function* prepend<T>(first: IteratorResult<T>, rest: AsyncGenerator<T>): AsyncGenerator<T> {
  if (first.done) return;
  yield first.value;
  yield* rest;
}
