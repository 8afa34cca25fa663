// Media over HTTP (spec 4.5, decisions.md §13): multipart uploads streamed to storage, downloads
// streamed back with Content-Type, Content-Length, ETag, Cache-Control, If-None-Match and Range.
// The resolvers (src/resolvers/media.ts) decide everything else.
import multipart from "@fastify/multipart";
import { Readable } from "node:stream";
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import { BadRequestError, PayloadTooLargeError, ValidationError } from "../errors.ts";
import { contextOf } from "../http/protected.ts";
import {
  attachUpload,
  authorizeUpload,
  downloadMedia,
  downloadPublicMedia,
  type MediaDownload,
  type StagedFile,
  stageUpload,
} from "../resolvers/media.ts";
import type { RouteDeps } from "./deps.ts";

type Download = {
  Params: { dim: string; id: string; field: string };
  Querystring: { size?: string; tenant?: string };
};

/** Downloads: no script, no plugin, no subresource, a unique origin (sandbox). */
export const MEDIA_CSP = "default-src 'none'; sandbox";

const FORM_FIELDS = new Set(["dimension", "record_id", "field", "public"]);

/**
 * A file part that came before the parts naming its record, read into memory (at most `maxBytes`,
 * 413 beyond, as a JSON body of BODY_LIMIT_BYTES is): nothing is stored before the upload is
 * authorized for that record and field (decisions.md, "Media keys").
 */
async function holdFile(file: Readable & { truncated?: boolean }, maxBytes: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of file) chunks.push(chunk as Buffer);
  const held = Buffer.concat(chunks);
  if (file.truncated || held.length > maxBytes)
    throw new PayloadTooLargeError(`The file is larger than ${maxBytes} bytes.`, { max_bytes: maxBytes });
  return held;
}

function flag(value: string | undefined): boolean {
  if (value === undefined || value === "" || value === "false" || value === "0") return false;
  if (value === "true" || value === "1") return true;
  throw new BadRequestError("INVALID_PARAMETER", "public must be true or false.", { field: "public" });
}

export const mediaRoutes: FastifyPluginAsync<RouteDeps> = async (app, { services }) => {
  const { maxBytes } = services.config.media;
  await app.register(multipart, {
    // One file per request; its own limit is checked while streaming (413), this one stops the parser.
    limits: { files: 1, fields: 10, fieldSize: 1000, parts: 12, fileSize: maxBytes + 1, headerPairs: 50 },
  });

  async function upload(request: FastifyRequest, reply: FastifyReply, pathDim: string | null) {
    const caller = contextOf(request);
    if (!request.isMultipart()) {
      throw new BadRequestError(
        "INVALID_REQUEST",
        "Send the file as multipart/form-data (parts file, dimension, record_id, field).",
      );
    }
    const fields: Record<string, string> = {};
    // The parts that name the record: all of them are checked before a byte is stored.
    const naming = pathDim ? ["record_id", "field"] : ["dimension", "record_id", "field"];
    const target = () => ({
      dim: pathDim ?? fields.dimension,
      recordId: fields.record_id,
      field: fields.field,
    });
    let staged: StagedFile | null = null;
    // A file sent before those parts (the order the specification lists them in), held until then.
    let held: Buffer | null = null;
    try {
      for await (const part of request.parts()) {
        if (part.type === "file") {
          if (part.fieldname !== "file" || staged || held) {
            part.file.resume();
            throw new BadRequestError("INVALID_REQUEST", "Send exactly one file, in the part named file.", {
              field: "file",
            });
          }
          // Refused before its bytes are read: the rights the parts so far allow to check (the
          // grant to update on the source at least).
          try {
            await authorizeUpload(services, caller, target());
          } catch (err) {
            part.file.resume();
            throw err;
          }
          if (naming.every((name) => fields[name]))
            staged = await stageUpload(services, caller.principal.tenantId, part.file);
          else held = await holdFile(part.file, maxBytes);
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
          fields[part.fieldname] = String(part.value);
        }
      }
      if (!staged && !held)
        throw new ValidationError("MISSING_PARAMETER", "The part file is required.", { field: "file" });
      const dim = pathDim ?? fields.dimension;
      for (const [name, value] of [
        ["dimension", dim],
        ["record_id", fields.record_id],
        ["field", fields.field],
      ] as const) {
        if (!value)
          throw new ValidationError("MISSING_PARAMETER", `The part ${name} is required.`, { field: name });
      }
      if (held) {
        await authorizeUpload(services, caller, target());
        staged = await stageUpload(services, caller.principal.tenantId, Readable.from([held]));
      }
      const { value, eventId } = await attachUpload(services, caller, staged!, {
        dim: dim!,
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
    } finally {
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
      services,
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
      const file = await downloadPublicMedia(
        services,
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
