// What a write may put into a MEDIA field (issue 18 §4, decisions.md §"Media field values"): the
// description of a file (its type, size, public flag) is the upload path's, never a client's. A
// client write may set a MEDIA field to null (clear it) or send back the value it holds (a PUT of
// a record as read); any other value is 400 MEDIA_VALUE_NOT_ALLOWED. Only src/resolvers/media.ts
// makes an UploadedMedia, after streaming and sniffing the file; the importer (trusted) is the
// system's own write.
import { ValidationError } from "../../errors.ts";
import type { DimensionDef, FieldDef } from "../../types.ts";
import type { WriteContext } from "./context.ts";

/** The value of a MEDIA field. */
export interface MediaValue {
  file_id: string;
  url: string;
  size: number;
  mime_type: string;
  uploaded_at: string;
  public: boolean;
}

/** A MEDIA value made by the upload path: the only new value a MEDIA field accepts. */
export class UploadedMedia implements MediaValue {
  readonly file_id: string;
  readonly url: string;
  readonly size: number;
  readonly mime_type: string;
  readonly uploaded_at: string;
  readonly public: boolean;
  constructor(v: MediaValue) {
    this.file_id = v.file_id;
    this.url = v.url;
    this.size = v.size;
    this.mime_type = v.mime_type;
    this.uploaded_at = v.uploaded_at;
    this.public = v.public;
  }
}

/** JSON text with object keys sorted (jsonb keeps its own key order): equal values, equal text. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const keys = Object.keys(value).sort();
    return `{${keys
      .map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`)
      .join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

/**
 * 400 MEDIA_VALUE_NOT_ALLOWED unless each MEDIA field among `fields` is set to null, to what it
 * holds now (`current`, absent on create), or to an UploadedMedia.
 */
export function checkMediaValues(
  w: WriteContext,
  dim: DimensionDef,
  fields: readonly FieldDef[],
  values: Record<string, unknown>,
  current?: Record<string, unknown>,
): void {
  if (w.trusted) return;
  for (const field of fields) {
    if (field.dataType !== "MEDIA") continue;
    const value = values[field.code];
    if (value === null || value === undefined || value instanceof UploadedMedia) continue;
    const held = current?.[field.code];
    if (held !== undefined && held !== null && canonical(value) === canonical(held)) continue;
    throw new ValidationError(
      "MEDIA_VALUE_NOT_ALLOWED",
      `${dim.code}.${field.code} describes an uploaded file: set it by uploading one (POST /api/v4/media/upload), clear it with null, or send back the value it holds.`,
      { field: field.code },
    );
  }
}
