// Media (spec 4.5, decisions.md §13): upload a file into a MEDIA field, download it (or a size of
// an image), and public downloads. The bytes stream to and from the store, never held whole in
// memory; the field is written through the write pipeline (audited, evented) and read through the
// read resolvers (grants, D flag, tenant).
//
// An upload's parts naming its record (dimension, record_id, field) come before its file: a file
// sent before them is refused unread (400, src/rest/media-routes.ts; issue 35 §5). The file is
// staged only once the upload is authorized for the record and field the form names: it streams to
// a staging key while its type is read from its first bytes and its size counted (413 at
// MEDIA_MAX_BYTES); once the form is read, the write authorizes it again and the staged file moves
// into place.
import { pipeline, Readable, Transform, type TransformCallback } from "node:stream";
import { fileTypeFromBuffer } from "file-type";
import type { Metadata, SharpOptions } from "sharp";
import {
  ApiError,
  BadRequestError,
  MediaStoreUnavailableError,
  NotFoundError,
  PayloadTooLargeError,
  ValidationError,
} from "../errors.ts";
import { authorize, authorizeWrite, fieldAllows } from "../auth/authorize.ts";
import { ident } from "../db/sql.ts";
import { TENANT_COLUMN } from "../metadata/data-types.ts";
import {
  fieldPrefix,
  fileKey,
  isFileId,
  MEDIA_SIZES,
  type MediaSize,
  newFileId,
  stagingKey,
} from "../media/keys.ts";
import type { MediaStore } from "../media/store.ts";
import { rowScopeSql } from "../query/compile.ts";
import { emptyRecordQuery } from "../query/types.ts";
import type { DimensionDef, FieldDef, MetadataModel, Queryable, RequestContext } from "../types.ts";
import { createReadContext } from "./read/context.ts";
import { getRecord } from "./read/get.ts";
import { ApiFieldError } from "./write/field-rules.ts";
import { type MediaValue, UploadedMedia } from "./write/media-values.ts";
import { updateOne } from "./write/operations.ts";
import { parseRecordId, recordNotFound } from "./write/record-store.ts";
import { callerWriteScope } from "./write/row-scope.ts";
import type { WriteDeps } from "./write/pipeline.ts";

export const MAX_MEGAPIXELS = 40;
const SNIFF_BYTES = 4100;
const IMAGE_TYPES = new Set(["image/png", "image/jpeg", "image/webp", "image/gif"]);

export interface MediaDeps extends WriteDeps {
  media: MediaStore;
}

export type { MediaValue };

/**
 * The types a download is served as (the type sniffed at upload, when it is one of these): formats
 * a browser does not run as a document. Anything else, whatever the stored value says (a value
 * written before uploads alone could set it, a type with a line break), is application/octet-stream.
 */
export const SERVED_TYPES: ReadonlySet<string> = new Set([
  ...IMAGE_TYPES,
  "image/avif",
  "image/bmp",
  "image/tiff",
  "image/heic",
  "application/pdf",
  "application/zip",
  "application/gzip",
  "audio/mpeg",
  "audio/ogg",
  "audio/wav",
  "video/mp4",
  "video/webm",
  "video/quicktime",
]);

const EXTENSIONS: ReadonlyMap<string, string> = new Map([
  ["image/png", ".png"],
  ["image/jpeg", ".jpg"],
  ["image/webp", ".webp"],
  ["image/gif", ".gif"],
  ["application/pdf", ".pdf"],
  ["application/zip", ".zip"],
  ["application/gzip", ".gz"],
  ["audio/mpeg", ".mp3"],
  ["video/mp4", ".mp4"],
]);

/** The Content-Type a stored type is served as. */
export function servedType(stored: unknown): string {
  return typeof stored === "string" && SERVED_TYPES.has(stored) ? stored : "application/octet-stream";
}

export interface StagedFile {
  key: string;
  size: number;
  mimeType: string;
}

export class UnsupportedMediaTypeError extends ApiError {
  constructor(found: string | null, allowed: readonly string[]) {
    super(
      415,
      "UNSUPPORTED_MEDIA_TYPE",
      "UnsupportedMediaType",
      `The file's content is ${found ?? "of no recognised type"}; accepted: ${allowed.join(", ")}.`,
    );
  }
}

/** Counts bytes (413 past the limit) and keeps the first SNIFF_BYTES for type detection. */
class Inspector extends Transform {
  head: Buffer[] = [];
  headBytes = 0;
  total = 0;
  constructor(private readonly max: number) {
    super();
  }
  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback) {
    this.total += chunk.length;
    if (this.total > this.max) {
      done(new PayloadTooLargeError(`The file is larger than ${this.max} bytes.`, { max_bytes: this.max }));
      return;
    }
    if (this.headBytes < SNIFF_BYTES) {
      this.head.push(chunk);
      this.headBytes += chunk.length;
    }
    done(null, chunk);
  }
}

/**
 * Streams an uploaded file to a staging key: size limited (413), type read from the content (415
 * unless allowed). The caller moves or deletes it.
 */
export async function stageUpload(deps: MediaDeps, tenantId: string, file: Readable): Promise<StagedFile> {
  const { maxBytes, allowedTypes } = deps.config.media;
  const key = stagingKey(tenantId);
  const inspector = new Inspector(maxBytes);
  // Either side's failure ends both. Past the limit (or any failure of the inspection), nothing more
  // of the file is read: the part destroyed, the multipart parser stops taking in the request body
  // (the answer closes it). A part that failed, or was destroyed, before this (its body ended without
  // the closing boundary, or its client went away, while the upload was being authorized) fails the
  // inspector at once: `pipe` would leave it waiting for bytes that never come, holding the upload's
  // slot and its staged file for good.
  const piped = pipeline(file, inspector, () => {});
  // The file part of @fastify/multipart reports its own limit as `truncated`.
  let size: number;
  try {
    size = await deps.media.put(key, piped, "application/octet-stream");
  } catch (err) {
    await deps.media.delete([key]).catch(() => {});
    if (err instanceof ApiError) throw err;
    if ((file as { truncated?: boolean }).truncated || inspector.total > maxBytes) {
      throw new PayloadTooLargeError(`The file is larger than ${maxBytes} bytes.`, { max_bytes: maxBytes });
    }
    throw err;
  }
  if ((file as { truncated?: boolean }).truncated) {
    await deps.media.delete([key]);
    throw new PayloadTooLargeError(`The file is larger than ${maxBytes} bytes.`, { max_bytes: maxBytes });
  }
  const type = await fileTypeFromBuffer(Buffer.concat(inspector.head));
  if (!type || !allowedTypes.includes(type.mime)) {
    await deps.media.delete([key]);
    throw new UnsupportedMediaTypeError(type?.mime ?? null, allowedTypes);
  }
  return { key, size, mimeType: type.mime };
}

function mediaField(
  model: MetadataModel,
  dimCode: string,
  fieldCode: string,
): { dim: DimensionDef; field: FieldDef } {
  const dim = model.dimensions.get(dimCode);
  if (!dim)
    throw new NotFoundError("DIMENSION_NOT_FOUND", `Dimension ${dimCode.slice(0, 30)} does not exist.`);
  const field = dim.fieldsByCode.get(fieldCode);
  if (!field)
    throw new ValidationError("INVALID_FIELD", `${fieldCode.slice(0, 60)} is not a field of ${dim.code}.`, {
      field: fieldCode.slice(0, 60),
    });
  if (field.dataType !== "MEDIA") {
    throw new BadRequestError("INVALID_FIELD_TYPE", `${field.code} is not a MEDIA field.`, {
      field: field.code,
    });
  }
  return { dim, field };
}

/** sharp (libvips) is loaded by the first image that needs it, not at start. */
async function loadSharp() {
  return (await import("sharp")).default;
}

/**
 * How an image is decoded, to check it at upload and to make its sizes: the same, so that an image
 * accepted is one whose sizes can be made. Data cut short is an error (not a grey band), at most
 * MAX_MEGAPIXELS, a GIF with all its frames.
 */
function decodeOptions(mimeType: string): SharpOptions {
  return {
    failOn: "truncated",
    limitInputPixels: MAX_MEGAPIXELS * 1_000_000,
    animated: mimeType === "image/gif",
  };
}

/** Pixels of an image, every frame counted (an animated GIF or WebP holds `pages` frames). */
function pixelsOf(meta: Metadata): number {
  return (meta.width ?? 0) * (meta.pageHeight ?? meta.height ?? 0) * (meta.pages ?? 1);
}

function imageTooLarge(meta: Metadata, field: string, status: 400 | 422): ValidationError {
  const frames = meta.pages ?? 1;
  return new ValidationError(
    "IMAGE_TOO_LARGE",
    `The image has more than ${MAX_MEGAPIXELS} megapixels${frames > 1 ? `, its ${frames} frames counted` : ""}${
      status === 422 ? ", so it has no sizes; download it without size" : ""
    }.`,
    { field, details: { width: meta.width, height: meta.pageHeight ?? meta.height, frames } },
    status,
  );
}

/** The bytes of a stored image (sharp takes its input whole in any case). */
async function bytesOf(stream: Readable): Promise<Buffer> {
  try {
    return Buffer.concat(await stream.toArray());
  } catch (err) {
    throw new MediaStoreUnavailableError(err);
  }
}

/** One size of an image: the longest side at most `px`, never enlarged, same format. */
async function resized(bytes: Buffer, mimeType: string, px: number): Promise<Buffer> {
  const sharp = await loadSharp();
  return sharp(bytes, decodeOptions(mimeType))
    .resize(px, px, { fit: "inside", withoutEnlargement: true })
    .toBuffer();
}

/**
 * An image is checked at upload as its sizes will be made: over MAX_MEGAPIXELS, all its frames
 * counted, it is 400 IMAGE_TOO_LARGE; one that cannot be decoded whole (damaged, cut short) is 400
 * INVALID_FILE. Its smallest size is made and dropped: the decoding its sizes need.
 */
async function checkImage(deps: MediaDeps, staged: StagedFile): Promise<void> {
  if (!IMAGE_TYPES.has(staged.mimeType)) return;
  const object = await deps.media.get(staged.key);
  if (!object) throw new Error("the staged upload disappeared");
  const bytes = await bytesOf(object.stream);
  const unreadable = () =>
    new ValidationError("INVALID_FILE", "The image cannot be read: it is damaged or cut short.", {
      field: "file",
    });
  const sharp = await loadSharp();
  let meta: Metadata;
  try {
    meta = await sharp(bytes, { limitInputPixels: false }).metadata();
  } catch {
    throw unreadable();
  }
  if (pixelsOf(meta) > MAX_MEGAPIXELS * 1_000_000) throw imageTooLarge(meta, "file", 400);
  try {
    await resized(bytes, staged.mimeType, MEDIA_SIZES.thumbnail);
  } catch {
    throw unreadable();
  }
}

export function downloadPath(
  dim: string,
  recordId: string,
  field: string,
  isPublic: boolean,
  tenant: string,
): string {
  const tail = `${encodeURIComponent(dim)}/${encodeURIComponent(recordId)}/${encodeURIComponent(field)}`;
  return isPublic
    ? `/api/v4/media/public/${tail}?tenant=${encodeURIComponent(tenant)}`
    : `/api/v4/media/${tail}`;
}

/**
 * The rights an upload needs, checked before any byte is stored (issue 18 §4): the grant to update
 * on the source; once the form names them, the dimension (served by the source), the MEDIA field
 * (modifiable by the caller) and the record (in the caller's tenant). The parts named after the
 * file are checked again, with everything else, by the write that attaches it.
 */
export async function authorizeUpload(
  deps: MediaDeps,
  request: RequestContext,
  target: { dim?: string | undefined; recordId?: string | undefined; field?: string | undefined },
): Promise<void> {
  const model = deps.metadata.current();
  if (!target.dim) {
    authorize(request, model, null, "update");
    return;
  }
  const dim = authorizeWrite(request, model, target.dim, "update");
  if (target.field) {
    const { field } = mediaField(model, dim.code, target.field);
    if (!fieldAllows(request, field, "M"))
      throw new ApiFieldError("FIELD_NOT_MODIFIABLE", "FieldNotModifiable", field.code, dim.code);
  }
  if (target.recordId) {
    // A record outside the caller's write scope is not found, as one that does not exist: the
    // upload is refused before its body is read either way (decisions.md §17).
    const id = parseRecordId(dim, target.recordId);
    const params: unknown[] = [request.principal.tenantId, id];
    const scope = rowScopeSql(callerWriteScope(request, model, dim), params, "$1");
    const found =
      id !== null &&
      (
        await deps.db.query(
          `SELECT 1 FROM ${ident(dim.tableName)} t WHERE t.${ident(TENANT_COLUMN)} = $1 AND t.${ident(dim.idField)} = $2${scope}`,
          params,
        )
      ).rows.length > 0;
    if (!found) throw recordNotFound(dim, target.recordId);
  }
}

export interface UploadTarget {
  dim: string;
  recordId: string;
  field: string;
  public: boolean;
}

/**
 * Attaches a staged file to a record's MEDIA field through the write pipeline (the rights of a
 * PATCH of that field). Files the field pointed at before are removed after the commit; on any
 * failure the new file is removed.
 */
export async function attachUpload(
  deps: MediaDeps,
  request: RequestContext,
  staged: StagedFile,
  target: UploadTarget,
): Promise<{ value: MediaValue; eventId: string }> {
  const tenant = request.principal.tenantId;
  let placed: string | null = null;
  try {
    const { dim, field } = mediaField(deps.metadata.current(), target.dim, target.field);
    await checkImage(deps, staged);
    const fileId = newFileId();
    placed = fileKey(tenant, dim.code, target.recordId, field.code, fileId);
    await deps.media.move(staged.key, placed);
    const value = new UploadedMedia({
      file_id: fileId,
      url: downloadPath(dim.code, target.recordId, field.code, target.public, tenant),
      size: staged.size,
      mime_type: staged.mimeType,
      uploaded_at: new Date().toISOString(),
      public: target.public,
    });
    const outcome = await updateOne(
      deps,
      request,
      dim.code,
      target.recordId,
      { [field.code]: value },
      "patch",
    );
    await removeOtherFiles(deps.media, tenant, dim.code, String(outcome.recordId), field.code, fileId);
    return { value, eventId: outcome.eventId };
  } catch (err) {
    await deps.media.delete([staged.key, ...(placed ? [placed] : [])]).catch(() => {});
    throw err;
  }
}

/** Removes every file of a field but `keep` (all of them when keep is null). */
export async function removeOtherFiles(
  store: MediaStore,
  tenant: string,
  dim: string,
  recordId: string,
  field: string,
  keep: string | null,
  olderThan?: Date,
): Promise<number> {
  const prefix = fieldPrefix(tenant, dim, recordId, field);
  const stale = (await store.list(prefix)).filter(
    (o) =>
      (keep === null || !o.key.startsWith(`${prefix}${keep}/`)) && (!olderThan || o.modified < olderThan),
  );
  await store.delete(stale.map((o) => o.key));
  return stale.length;
}

export interface MediaDownload {
  stream: Readable;
  size: number;
  length: number;
  range: { start: number; end: number } | null;
  contentType: string;
  /** A name to save it under: the field and the file id, with the type's extension. */
  fileName: string;
  etag: string;
  public: boolean;
}

function parseSize(size: string | undefined, mimeType: string): MediaSize | null {
  if (size === undefined || size === "" || size === "original") return null;
  if (!Object.hasOwn(MEDIA_SIZES, size)) {
    throw new BadRequestError("INVALID_PARAMETER", "size is thumbnail, small, medium or large.", {
      field: "size",
    });
  }
  if (!IMAGE_TYPES.has(mimeType)) {
    throw new BadRequestError("INVALID_PARAMETER", "Sizes exist for images only.", { field: "size" });
  }
  return size as MediaSize;
}

/** Parses `Range: bytes=a-b` against the size; null for none or a form not served (whole file). */
export function parseRange(header: string | undefined, size: number): { start: number; end: number } | null {
  const m = header ? /^bytes=(\d*)-(\d*)$/.exec(header.trim()) : null;
  if (!m || (m[1] === "" && m[2] === "")) return null;
  let start: number;
  let end: number;
  if (m[1] === "") {
    start = Math.max(0, size - Number(m[2]));
    end = size - 1;
  } else {
    start = Number(m[1]);
    end = m[2] === "" ? size - 1 : Math.min(Number(m[2]), size - 1);
  }
  if (start > end || start >= size) {
    throw new ApiError(416, "RANGE_NOT_SATISFIABLE", "RangeNotSatisfiable", `The file has ${size} bytes.`, {
      headers: { "content-range": `bytes */${size}` },
    });
  }
  return { start, end };
}

async function serve(
  deps: MediaDeps,
  tenant: string,
  dim: string,
  recordId: string,
  field: string,
  value: unknown,
  sizeParam: string | undefined,
  rangeHeader: string | undefined,
): Promise<MediaDownload> {
  const v = value as Partial<MediaValue> | null;
  if (!v || !isFileId(v.file_id)) throw new NotFoundError("MEDIA_NOT_FOUND", "This field holds no file.");
  const mimeType = servedType(v.mime_type);
  const size = parseSize(sizeParam, mimeType);
  const original = fileKey(tenant, dim, recordId, field, v.file_id);
  let key = original;
  if (size) {
    key = fileKey(tenant, dim, recordId, field, v.file_id, size);
    if ((await deps.media.size(key)) === null) await makeSize(deps.media, original, key, size, mimeType);
  }
  const total = await deps.media.size(key);
  if (total === null) throw new NotFoundError("MEDIA_NOT_FOUND", "The file is gone from storage.");
  const range = size ? null : parseRange(rangeHeader, total);
  const object = await deps.media.get(key, range ?? undefined);
  if (!object) throw new NotFoundError("MEDIA_NOT_FOUND", "The file is gone from storage.");
  return {
    stream: object.stream,
    size: object.size,
    length: object.length,
    range,
    contentType: mimeType,
    fileName: `${field}-${v.file_id}${EXTENSIONS.get(mimeType) ?? ""}`,
    etag: `"${v.file_id}-${size ?? "original"}"`,
    public: v.public === true,
  };
}

/**
 * Makes a size of an image once. An image it cannot be made of (stored before uploads were checked
 * whole, or damaged since) is the file's fault, not the server's: 422 IMAGE_TOO_LARGE or
 * INVALID_FILE, the original still served.
 */
async function makeSize(store: MediaStore, original: string, key: string, size: MediaSize, mimeType: string) {
  const object = await store.get(original);
  if (!object) throw new NotFoundError("MEDIA_NOT_FOUND", "The file is gone from storage.");
  const bytes = await bytesOf(object.stream);
  const unreadable = () =>
    new ValidationError(
      "INVALID_FILE",
      `The stored image cannot be read (it is damaged or cut short), so it has no ${size} size; download it without size.`,
      { field: "size" },
      422,
    );
  const sharp = await loadSharp();
  let out: Buffer;
  try {
    const meta = await sharp(bytes, { limitInputPixels: false }).metadata();
    if (pixelsOf(meta) > MAX_MEGAPIXELS * 1_000_000) throw imageTooLarge(meta, "size", 422);
    out = await resized(bytes, mimeType, MEDIA_SIZES[size]);
  } catch (err) {
    throw err instanceof ApiError ? err : unreadable();
  }
  await store.put(key, Readable.from([out]), mimeType);
}

/** GET /api/v4/media/{dim}/{id}/{field}: the rights of a detail read of the field. */
export async function downloadMedia(
  deps: MediaDeps & { readDb?: Queryable },
  request: RequestContext,
  dimCode: string,
  recordId: string,
  fieldCode: string,
  sizeParam: string | undefined,
  rangeHeader: string | undefined,
): Promise<MediaDownload> {
  const { dim, field } = mediaField(deps.metadata.current(), dimCode, fieldCode);
  const rc = createReadContext({ db: deps.readDb ?? deps.db, metadata: deps.metadata }, request);
  const record = await getRecord(rc, dim.code, recordId, emptyRecordQuery({ fields: [field.code] }));
  return serve(
    deps,
    request.principal.tenantId,
    dim.code,
    String(record.data[dim.idField] ?? recordId),
    field.code,
    record.data[field.code],
    sizeParam,
    rangeHeader,
  );
}

/** GET /api/v4/media/public/{dim}/{id}/{field}: no token; only files uploaded public. */
export async function downloadPublicMedia(
  deps: MediaDeps,
  dimCode: string,
  recordId: string,
  fieldCode: string,
  tenant: string | undefined,
  sizeParam: string | undefined,
  rangeHeader: string | undefined,
): Promise<MediaDownload> {
  const notFound = () => new NotFoundError("MEDIA_NOT_FOUND", "No public file here.");
  let dim: DimensionDef;
  let field: FieldDef;
  try {
    ({ dim, field } = mediaField(deps.metadata.current(), dimCode, fieldCode));
  } catch {
    throw notFound();
  }
  const idField = dim.fieldsByCode.get(dim.idField);
  if (!idField) throw notFound();
  const { rows } = await deps.db.query<{ TENANT_ID: string; ID: unknown; VALUE: unknown }>(
    `SELECT "TENANT_ID", ${ident(dim.idField)} AS "ID", ${ident(field.code)} AS "VALUE"
       FROM ${ident(dim.tableName)}
      WHERE ${ident(dim.idField)}::text = $1 AND ($2::text IS NULL OR "TENANT_ID" = $2)
        AND ${dim.fieldsByCode.has("TREC") ? `"TREC" <> 'C' AND ` : ""}${ident(field.code)} ->> 'public' = 'true'
      LIMIT 2`,
    [recordId, tenant ?? null],
  );
  // A record id shared by two tenants' public files needs ?tenant= (the url a public upload gets).
  if (rows.length !== 1) throw notFound();
  const row = rows[0]!;
  return serve(deps, row.TENANT_ID, dim.code, String(row.ID), field.code, row.VALUE, sizeParam, rangeHeader);
}

/** A Readable from a web stream or a Buffer, for tests and adapters. */
export function toReadable(body: Buffer | Readable): Readable {
  return Buffer.isBuffer(body) ? Readable.from([body]) : body;
}
