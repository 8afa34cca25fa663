// Storage keys from validated parts only: tenant, dimension and field are checked identifiers, the
// record id is base64url-encoded, the file id a UUID. No part can carry a `/` or `..`.
import { randomUUID } from "node:crypto";

export const MEDIA_SIZES = { thumbnail: 150, small: 320, medium: 640, large: 1280 } as const;
export type MediaSize = keyof typeof MEDIA_SIZES;

const IDENT = /^[A-Za-z0-9_.-]{1,100}$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

function ident(value: string, what: string): string {
  if (!IDENT.test(value) || value === "." || value === "..")
    throw new Error(`invalid ${what} in a media key`);
  return value;
}

export function newFileId(): string {
  return randomUUID();
}

export function isFileId(value: unknown): value is string {
  return typeof value === "string" && UUID.test(value);
}

/** Everything stored for one record: `t/<tenant>/<dim>/<record>/`. */
export function recordPrefix(tenant: string, dim: string, recordId: string): string {
  return `t/${ident(tenant, "tenant")}/${ident(dim, "dimension")}/${Buffer.from(recordId).toString("base64url")}/`;
}

/** One field's files: `…/<field>/`. */
export function fieldPrefix(tenant: string, dim: string, recordId: string, field: string): string {
  return `${recordPrefix(tenant, dim, recordId)}${ident(field, "field")}/`;
}

/** The original (`original`) or a size of one file. */
export function fileKey(
  tenant: string,
  dim: string,
  recordId: string,
  field: string,
  fileId: string,
  variant: "original" | MediaSize = "original",
): string {
  if (!isFileId(fileId)) throw new Error("invalid file id in a media key");
  return `${fieldPrefix(tenant, dim, recordId, field)}${fileId}/${variant}`;
}

export function stagingKey(tenant: string): string {
  return `staging/${ident(tenant, "tenant")}/${randomUUID()}`;
}
