// Export and import over REST (decisions §20): GET /api/v4/core/{dim}/export streams every row a
// list with the same parameters matches (CSV, NDJSON or a JSON array) at the client's pace, in its
// tenant's heavy lane until the body ends or the client goes away; POST /api/v4/core/{dim}/import
// receives a CSV or NDJSON body whole into a temporary file (src/rest/import-spool.ts), then
// writes its rows from that file through the write pipeline, in its tenant's heavy lane
// throughout. Both call resolvers (src/resolvers/read/export.ts, src/resolvers/write/import.ts);
// nothing is decided here but the media types and the phases of an import.
import { Readable } from "node:stream";
import type { FastifyPluginAsync, FastifyRequest } from "fastify";
import { BadRequestError, ApiError } from "../errors.ts";
import { httpLaneClient } from "../http/heavy-requests.ts";
import { contextOf } from "../http/protected.ts";
import type { QueryParams } from "../query/rest-params.ts";
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
      "An import body is text/csv (a header row of field codes) or application/x-ndjson, in UTF-8.",
    );
  }
  return essence === "text/csv" ? "csv" : "ndjson";
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
  // Import bodies reach the handler as the request's stream, unread (this plugin's routes only):
  // the import spools them to disk, then parses them as its rows are written.
  app.addContentTypeParser([...IMPORT_MEDIA_TYPES], (_request, payload, done) => done(null, payload));
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

  app.post<DimParams>("/api/v4/core/:dim/import", async (request, reply) => {
    const query = request.query as QueryParams;
    const mode = modeOf(query);
    const atomic = flagOf(query, "atomic");
    const format = importFormatOf(request);
    const { importMaxBytes: max, importWriteTimeoutMs } = services.config;
    const length = request.headers["content-length"];
    // Refused from its announced length before a byte is read (the connection then closes).
    if (length !== undefined && Number(length) > max) {
      reply.header("connection", "close");
      throw tooLarge(max);
    }
    // No body at all (Content-Length: 0) reaches no parser: no rows.
    const body = request.body instanceof Readable ? request.body : Readable.from([]);
    const ctx = contextOf(request);
    const options = { mode, atomic, writeTimeoutMs: importWriteTimeoutMs, signal: closing.signal };
    let spooled: SpooledBody | null = null;
    let leave = () => {};
    try {
      const tenant = services.forTenant(ctx.principal.tenantId);
      const target = await authorizeImport(tenant, ctx, request.params.dim, options);
      leave = await heavy.enter(ctx.principal.tenantId, Number.POSITIVE_INFINITY, httpLaneClient(reply.raw));
      // Receiving: the whole body into its file, within REQUEST_TIMEOUT_MS (Node's server cuts a
      // request that has not fully arrived by then) and IMPORT_MAX_BYTES.
      spooled = await spool.receive(body, max, closing.signal);
      // Writing, from the file: bounded by IMPORT_WRITE_TIMEOUT_MS, not by the request timeout
      // (which no longer runs once the body is in). A client that goes away meanwhile does not stop
      // it: its body was received whole, and its rows are written as one that waited would have.
      const result = await importRecords(tenant, ctx, target, importRows(spooled.open(), format), options);
      return { data: result };
    } catch (err) {
      // The rest of a refused body is not read: the connection closes after the answer.
      if (!body.readableEnded) reply.header("connection", "close");
      throw err;
    } finally {
      await spooled?.remove();
      leave();
    }
  });
};

async function* prepend<T>(first: IteratorResult<T>, rest: AsyncGenerator<T>): AsyncGenerator<T> {
  if (first.done) return;
  yield first.value;
  yield* rest;
}
