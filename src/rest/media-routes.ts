// Media over HTTP (spec 4.5, decisions.md §13): multipart uploads (the parts naming the record
// before the file, at most MEDIA_UPLOADS_PER_USER / _PER_TENANT at once) streamed to storage, downloads
// streamed back with Content-Type, Content-Length, ETag, Cache-Control, If-None-Match and Range.
// The resolvers (src/resolvers/media.ts) decide everything else.
import multipart from "@fastify/multipart";
import type { Readable } from "node:stream";
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import { ApiError, BadRequestError, ValidationError } from "../errors.ts";
import { callerOf, contextOf } from "../http/protected.ts";
import { createUploadSlots } from "../media/upload-slots.ts";
import {
  attachUpload,
  authorizeUpload,
  downloadMedia,
  downloadPublicMedia,
  type MediaDownload,
  type StagedFile,
  stageUpload,
} from "../resolvers/media.ts";
import { type RouteDeps, servicesOf } from "./deps.ts";
import { formContextOf } from "./scope.ts";

type Download = {
  Params: { dim: string; id: string; field: string };
  Querystring: { size?: string; tenant?: string };
};

/** Downloads: no script, no plugin, no subresource, a unique origin (sandbox). */
export const MEDIA_CSP = "default-src 'none'; sandbox";

/** The form's parts besides the file: the record named, `public`, and the scope (as in a JSON write body). */
const FORM_FIELDS = new Set(["dimension", "record_id", "field", "public", "source", "center_dett"]);

function flag(value: string | undefined): boolean {
  if (value === undefined || value === "" || value === "false" || value === "0") return false;
  if (value === "true" || value === "1") return true;
  throw new BadRequestError("INVALID_PARAMETER", "public must be true or false.", { field: "public" });
}

/** The multipart parser's limits: one file, the form fields above, a few parts more. */
const FORM_LIMITS = { files: 1, fields: 10, fieldSize: 1000, parts: 12, headerPairs: 50 } as const;

/**
 * The multipart parser's refusals of a malformed form, as 400s saying what is wrong: @fastify/busboy
 * throws plain errors (a 500 otherwise), and @fastify/multipart answers its count limits with 413s
 * that the error handler would take for a body over its byte limit. Null for any other error.
 */
function formError(err: unknown): ApiError | null {
  if (err instanceof ApiError || !(err instanceof Error)) return null;
  const code = (err as { code?: unknown }).code;
  if (code === "FST_FILES_LIMIT")
    return new BadRequestError("INVALID_REQUEST", "Send exactly one file, in the part named file.", {
      field: "file",
      details: { max_files: FORM_LIMITS.files },
    });
  if (code === "FST_FIELDS_LIMIT")
    return new BadRequestError(
      "INVALID_REQUEST",
      `The form has more than ${FORM_LIMITS.fields} fields; send only the parts ${[...FORM_FIELDS].join(", ")}, then file.`,
      { details: { max_fields: FORM_LIMITS.fields } },
    );
  if (code === "FST_PARTS_LIMIT")
    return new BadRequestError(
      "INVALID_REQUEST",
      `The form has more than ${FORM_LIMITS.parts} parts; send only the parts ${[...FORM_FIELDS].join(", ")}, then file.`,
      { details: { max_parts: FORM_LIMITS.parts } },
    );
  // @fastify/busboy's messages (deps/dicer, lib/types/multipart.js, deps/streamsearch).
  if (err.message === "Multipart: Boundary not found")
    return new BadRequestError(
      "INVALID_REQUEST",
      "The Content-Type multipart/form-data names no boundary; send multipart/form-data; boundary=<boundary>.",
    );
  if (err.message.startsWith("The needle cannot have a length bigger than"))
    return new BadRequestError(
      "INVALID_REQUEST",
      "The multipart boundary is too long; RFC 2046 allows at most 70 characters.",
    );
  if (/unexpected end of multipart data/i.test(err.message))
    return new BadRequestError(
      "INVALID_REQUEST",
      "The multipart body ended without its closing boundary line (--<boundary>--); send the whole form.",
    );
  return null;
}

/**
 * The parts of a form in the order the parser meets them, to name a JSON field it drops.
 * @fastify/multipart parses a field part declared `Content-Type: application/json`; one that does
 * not parse (or that a fieldSize cut short) is dropped, and the form answered 406 once it has been
 * read to its end, naming no part. busboy's `isPartAFile` sees every part's name and type first
 * (its default answer kept), so a part received after dropped JSON parts names the first of them
 * (before a file's bytes are read), and the parts never received name it at the end.
 */
function partsSeen() {
  const seen: Array<{ name: string; json: boolean }> = [];
  let next = 0;
  return {
    isPartAFile(name: string | undefined, contentType: string | undefined, fileName: string | undefined) {
      const file = contentType === "application/octet-stream" || fileName !== undefined;
      const json = !file && contentType?.startsWith("application/json") === true;
      // A name of Object.prototype is refused for itself (FST_PROTO_VIOLATION), not as JSON.
      seen.push({ name: name ?? "", json: json && !(name !== undefined && name in Object.prototype) });
      return file;
    },
    /** The first JSON field dropped before the part `name`, now received. */
    received(name: string): string | undefined {
      let dropped: string | undefined;
      while (next < seen.length) {
        const part = seen[next++]!;
        if (part.name === name) break;
        if (part.json) dropped ??= part.name;
      }
      return dropped;
    },
    /** The first JSON field dropped after the last part received. */
    droppedLast: (): string | undefined => seen.slice(next).find((p) => p.json)?.name,
  };
}

/** The 400 for a part declared application/json that does not parse (its name if known). */
function invalidJsonPart(name: string | undefined): BadRequestError {
  return new BadRequestError(
    "INVALID_JSON",
    `The part ${name ?? "(unnamed)"} is declared Content-Type: application/json but is not valid JSON (a value over ${FORM_LIMITS.fieldSize} bytes never is); send valid JSON, or the value as text/plain.`,
    name === undefined ? {} : { field: name },
  );
}

/**
 * A file part that is not read: destroyed, so busboy stops parsing and nothing more of the body is
 * taken in (the answer then closes the connection: see `upload`).
 */
function refusePart(file: Readable): void {
  file.destroy();
}

export const mediaRoutes: FastifyPluginAsync<RouteDeps> = async (app, { services }) => {
  const { maxBytes, uploadsPerUser, uploadsPerTenant } = services.config.media;
  // Uploads under way in this process, per user and per tenant (429 past either cap).
  const slots = createUploadSlots({ perUser: uploadsPerUser, perTenant: uploadsPerTenant });
  await app.register(multipart, {
    // One file per request; its own limit is checked while streaming (413), this one stops the parser.
    limits: { ...FORM_LIMITS, fileSize: maxBytes + 1 },
  });

  async function upload(request: FastifyRequest, reply: FastifyReply, pathDim: string | null) {
    const { principal } = callerOf(request);
    // The record and its event are in the tenant's database (decisions.md §18).
    const tenant = services.forTenant(principal.tenantId);
    let release = () => {};
    const fields: Record<string, string> = {};
    // The scope: the query string's source and center_dett, else the form's parts of those names
    // (sent before the file, like the parts naming the record); given in both, they must agree.
    const scoped = () => formContextOf(request, { source: fields.source, center_dett: fields.center_dett });
    // The parts that name the record: all of them come, and are checked, before the file's first
    // byte is read; the file then streams to the store's staging (never held in memory).
    const naming = pathDim ? ["record_id", "field"] : ["dimension", "record_id", "field"];
    const target = () => ({
      dim: pathDim ?? fields.dimension,
      recordId: fields.record_id,
      field: fields.field,
    });
    let staged: StagedFile | null = null;
    const parts = partsSeen();
    try {
      if (!request.isMultipart()) {
        throw new BadRequestError(
          "INVALID_REQUEST",
          "Send the file as multipart/form-data (parts dimension, record_id, field, then file).",
        );
      }
      // Refused past a cap before a byte of the body is read.
      release = slots.take(principal.userId, principal.tenantId);
      for await (const part of request.parts({ isPartAFile: parts.isPartAFile })) {
        const dropped = parts.received(part.fieldname);
        if (dropped !== undefined) {
          if (part.type === "file") refusePart(part.file);
          throw invalidJsonPart(dropped);
        }
        if (part.type === "file") {
          if (part.fieldname !== "file" || staged) {
            refusePart(part.file);
            throw new BadRequestError("INVALID_REQUEST", "Send exactly one file, in the part named file.", {
              field: "file",
            });
          }
          // Refused before its bytes are read: the rights the parts so far allow to check (the
          // grant to update on the source at least; the dimension, field and record they name).
          try {
            await authorizeUpload(tenant, scoped(), target());
          } catch (err) {
            refusePart(part.file);
            throw err;
          }
          const missing = naming.filter((name) => !fields[name]);
          if (missing.length > 0) {
            refusePart(part.file);
            throw new BadRequestError(
              "INVALID_REQUEST",
              `Send the parts ${naming.join(", ")} before the part file (missing before it: ${missing.join(", ")}).`,
              { field: missing[0], details: { missing } },
            );
          }
          staged = await stageUpload(tenant, principal.tenantId, part.file);
        } else if (FORM_FIELDS.has(part.fieldname)) {
          // Once: a name sent again after the file would point the checked upload elsewhere.
          if (fields[part.fieldname] !== undefined)
            throw new BadRequestError(
              "INVALID_REQUEST",
              `The part ${part.fieldname} is sent twice; send each of dimension, record_id and field once.`,
              {
                field: part.fieldname,
              },
            );
          // A value over the parser's fieldSize arrives cut short: refused, never taken as another.
          if (part.valueTruncated)
            throw new BadRequestError(
              "INVALID_REQUEST",
              `The part ${part.fieldname} is longer than ${FORM_LIMITS.fieldSize} bytes.`,
              { field: part.fieldname, details: { max_bytes: FORM_LIMITS.fieldSize } },
            );
          const value = String(part.value);
          // The path names the dimension: a part naming another would be left unread.
          if (part.fieldname === "dimension" && pathDim !== null && value !== pathDim)
            throw new BadRequestError(
              "INVALID_PARAMETER",
              `The part dimension names ${value.slice(0, 60)}, but the path names ${pathDim.slice(0, 60)}: the file goes to the path's dimension. Leave the part out, or give the same.`,
              { field: "dimension" },
            );
          fields[part.fieldname] = value;
          // A scope part that the query string contradicts is refused as soon as it is read.
          if (part.fieldname === "source" || part.fieldname === "center_dett") scoped();
        } else {
          // A part of no meaning here would be left unread (the caller believing it applied).
          const name = part.fieldname.slice(0, 60);
          throw new BadRequestError(
            "INVALID_PARAMETER",
            `The part ${name} is not taken by an upload, whose form has the parts ${[...FORM_FIELDS].join(", ")}, then file.`,
            { field: name },
          );
        }
      }
      if (!staged) {
        for (const name of naming) {
          if (!fields[name])
            throw new ValidationError("MISSING_PARAMETER", `The part ${name} is required.`, { field: name });
        }
        throw new ValidationError("MISSING_PARAMETER", "The part file is required.", { field: "file" });
      }
      const { value, eventId } = await attachUpload(tenant, scoped(), staged, {
        dim: (pathDim ?? fields.dimension)!,
        recordId: fields.record_id!,
        field: fields.field!,
        public: flag(fields.public),
      });
      staged = null;
      reply.status(201);
      return {
        file_id: value.file_id,
        url: value.url,
        size: value.size,
        mime_type: value.mime_type,
        uploaded_at: value.uploaded_at,
        public: value.public,
        event_id: eventId,
      };
    } catch (err) {
      // Refused before the body is read to its end (past a cap, a file out of order or too large,
      // a right missing): the answer closes the connection rather than reading the rest of it.
      if (!request.raw.complete) reply.header("connection", "close");
      if (err instanceof Error && (err as { code?: unknown }).code === "FST_INVALID_JSON_FIELD_ERROR")
        throw invalidJsonPart(parts.droppedLast());
      throw formError(err) ?? err;
    } finally {
      release();
      if (staged) await services.media.delete([staged.key]).catch(() => {});
    }
  }

  app.post("/api/v4/media/upload", (request, reply) => upload(request, reply, null));
  app.post<{ Params: { dim: string } }>("/api/v4/core/:dim/media", (request, reply) =>
    upload(request, reply, request.params.dim),
  );

  function send(request: FastifyRequest, reply: FastifyReply, file: MediaDownload) {
    // A file is never a page of this origin: not sniffed into another type, not run as a document
    // (sandboxed, nothing loaded), and saved rather than shown unless it is an image.
    reply.header("x-content-type-options", "nosniff");
    reply.header("content-security-policy", MEDIA_CSP);
    reply.header(
      "content-disposition",
      file.contentType.startsWith("image/") ? "inline" : `attachment; filename="${file.fileName}"`,
    );
    reply.header("etag", file.etag);
    reply.header("cache-control", file.public ? "public, no-cache" : "private, no-cache");
    reply.header("accept-ranges", "bytes");
    const match = request.headers["if-none-match"];
    if (match?.split(",").some((t) => t.trim() === file.etag || t.trim() === "*")) {
      file.stream.destroy();
      return reply.status(304).send();
    }
    reply.header("content-type", file.contentType);
    reply.header("content-length", String(file.length));
    if (file.range) {
      reply.status(206);
      reply.header("content-range", `bytes ${file.range.start}-${file.range.end}/${file.size}`);
    }
    return reply.send(file.stream);
  }

  const download = async (request: FastifyRequest<Download>, reply: FastifyReply) => {
    const { dim, id, field } = request.params;
    const file = await downloadMedia(
      servicesOf(services, request),
      contextOf(request),
      dim,
      id,
      field,
      request.query.size,
      request.headers.range,
    );
    return send(request, reply, file);
  };
  app.get<Download>("/api/v4/media/:dim/:id/:field", download);
  app.get<Download>("/api/v4/core/:dim/:id/media/:field", download);

  app.get<Download>(
    "/api/v4/media/public/:dim/:id/:field",
    { config: { public: true } },
    async (request, reply) => {
      const { dim, id, field } = request.params;
      // A public file's url names its tenant: without it, the main database's records are searched.
      const { tenant } = request.query;
      const file = await downloadPublicMedia(
        typeof tenant === "string" && tenant !== "" ? services.forTenant(tenant) : services,
        dim,
        id,
        field,
        request.query.tenant,
        request.query.size,
        request.headers.range,
      );
      return send(request, reply, file);
    },
  );
};
