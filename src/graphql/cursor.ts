// Keyset cursors of GraphQL lists (decisions §21): `end_cursor` is opaque, base64url of
// `version ‖ iv ‖ AES-256-GCM(JSON v) ‖ tag`, where `v` holds the sort keys' values of the page's
// last row (the id last). The values are encrypted, not only signed: a list may be sorted by a
// field the caller may search (R) but not read in lists (no L), and a cursor must not show it
// (spec graphql.md: such fields give "never data"). What the list is (dimension, source,
// center_dett, sort, filter, search, cond_trec, tenant and user) is the authenticated data of the
// encryption, so a cursor given as `after` to another list, sort, filter or caller, or altered,
// fails authentication: 400 INVALID_CURSOR. The keys are derived (HKDF) from the token signing
// secret (JWT_SECRET or DATA_DIR/jwt-secret), so every process of a deployment accepts the cursors
// of the others. The iv is synthetic (an HMAC of the list and the values), never repeated for two
// different cursors under one key, however many are issued. The values are then cast by their
// fields' codecs by the planner (src/query/plan.ts) and travel as SQL parameters.
import { createCipheriv, createDecipheriv, createHmac, createSecretKey, hkdfSync } from "node:crypto";
import { invalidCursor } from "../query/errors.ts";
import type { FilterExpr, FilterLiteral, SortSpec, TrecState } from "../query/types.ts";

/** What a cursor is bound to: the list, its order and rows, and who walks it. */
export interface CursorScope {
  readonly dim: string;
  readonly source: string | null;
  readonly centerDett: string | null;
  readonly tenantId: string;
  readonly userId: string;
  readonly sort: readonly SortSpec[];
  readonly filter: FilterExpr | null;
  readonly search: string | null;
  readonly condTrec: readonly TrecState[] | null;
}

export interface CursorCodec {
  /** The cursor of a row whose sort keys hold `values` (the id last). */
  encode(scope: CursorScope, values: readonly unknown[]): string;
  /** The values of a cursor this scope issued; INVALID_CURSOR for any other text. */
  decode(scope: CursorScope, cursor: string): FilterLiteral[];
}

/** A cursor is a few sort values: longer text is no cursor of ours, refused before decoding. */
export const MAX_CURSOR_LENGTH = 4096;
const MAX_CURSOR_VALUES = 64;
/** The format's first byte; another one is no cursor of this format. */
const VERSION = 2;
const IV_BYTES = 12;
const TAG_BYTES = 16;
/** The plaintext is padded with spaces to a multiple of this, so a length says little. */
const PAD_BYTES = 32;
const HEADER_BYTES = 1 + IV_BYTES;

function scopeText(scope: CursorScope): string {
  return JSON.stringify([
    scope.dim,
    scope.source,
    scope.centerDett,
    scope.tenantId,
    scope.userId,
    scope.sort.map((s) => [s.field, s.direction]),
    scope.filter,
    scope.search,
    scope.condTrec,
  ]);
}

/** A value read from a row as a JSON literal (int8 beyond JS numbers comes as its digits). */
function literal(value: unknown): FilterLiteral {
  if (value === null || value === undefined) return null;
  if (typeof value === "string" || typeof value === "boolean") return value;
  if (typeof value === "number") return Number.isFinite(value) ? value : String(value);
  if (typeof value === "bigint") return value.toString();
  return String(value);
}

function isLiteral(v: unknown): v is FilterLiteral {
  return (
    v === null ||
    typeof v === "string" ||
    typeof v === "boolean" ||
    (typeof v === "number" && Number.isFinite(v))
  );
}

function notACursor(): never {
  throw invalidCursor("after is not a cursor of this list.");
}

/** The codec of cursors encrypted with keys derived from `secret` (the token signing secret). */
export function cursorCodec(secret: Uint8Array): CursorCodec {
  const keys = Buffer.from(hkdfSync("sha256", secret, "dimensio", "graphql keyset cursor v2", 64));
  // Key objects, made once: a cipher or HMAC over one costs a fraction of one over raw bytes.
  const encryptionKey = createSecretKey(keys.subarray(0, 32));
  const ivKey = createSecretKey(keys.subarray(32));
  // A request encodes and decodes against the same scope: its text is made once.
  const scopes = new WeakMap<CursorScope, Buffer>();
  const aadOf = (scope: CursorScope) => {
    let aad = scopes.get(scope);
    if (!aad) {
      aad = Buffer.from(scopeText(scope));
      scopes.set(scope, aad);
    }
    return aad;
  };
  return {
    encode(scope, values) {
      const aad = aadOf(scope);
      const json = Buffer.from(JSON.stringify(values.map(literal)));
      const plain = Buffer.alloc(Math.ceil(json.length / PAD_BYTES) * PAD_BYTES, 0x20);
      json.copy(plain);
      // Synthetic iv: the same list and row give the same cursor, two different ones (almost
      // surely) never the same iv, so GCM's nonce is not reused by chance over the key's life.
      const iv = createHmac("sha256", ivKey).update(aad).update(plain).digest().subarray(0, IV_BYTES);
      const cipher = createCipheriv("aes-256-gcm", encryptionKey, iv, { authTagLength: TAG_BYTES });
      cipher.setAAD(aad);
      const body = cipher.update(plain);
      const rest = cipher.final();
      return Buffer.concat([Buffer.of(VERSION), iv, body, rest, cipher.getAuthTag()]).toString("base64url");
    },
    decode(scope, cursor) {
      if (cursor.length === 0 || cursor.length > MAX_CURSOR_LENGTH || !/^[A-Za-z0-9_-]+$/.test(cursor))
        notACursor();
      const bytes = Buffer.from(cursor, "base64url");
      if (bytes.length < HEADER_BYTES + PAD_BYTES + TAG_BYTES || bytes[0] !== VERSION) notACursor();
      const decipher = createDecipheriv("aes-256-gcm", encryptionKey, bytes.subarray(1, HEADER_BYTES), {
        authTagLength: TAG_BYTES,
      });
      decipher.setAAD(aadOf(scope));
      decipher.setAuthTag(bytes.subarray(bytes.length - TAG_BYTES));
      let plain: Buffer;
      try {
        plain = Buffer.concat([
          decipher.update(bytes.subarray(HEADER_BYTES, bytes.length - TAG_BYTES)),
          decipher.final(),
        ]);
      } catch {
        throw invalidCursor(
          "after is a cursor of another list, sort, filter or caller (or was altered); start again without after.",
        );
      }
      // Authenticated, so ours; checked all the same before the planner casts it.
      let v: unknown;
      try {
        v = JSON.parse(plain.toString("utf8"));
      } catch {
        notACursor();
      }
      if (!Array.isArray(v) || v.length === 0 || v.length > MAX_CURSOR_VALUES || !v.every(isLiteral))
        notACursor();
      return v;
    },
  };
}
