// Keyset cursors of GraphQL lists (decisions §21): `end_cursor` is base64url of a small JSON
// `{v, s}`: `v` the sort keys' values of the page's last row (the id last), `s` an HMAC over `v` and
// what the list is (dimension, source, center_dett, sort, filter, search, cond_trec, tenant and
// user). A cursor given as `after` is checked against the list it is given to: one of another
// list, sort, filter or caller, or one altered, is 400 INVALID_CURSOR. The key is derived from the
// token signing secret (JWT_SECRET or DATA_DIR/jwt-secret), so every process of a deployment
// accepts the cursors of the others. The values are then cast by their fields' codecs by the
// planner (src/query/plan.ts) and travel as SQL parameters.
import { createHmac, timingSafeEqual } from "node:crypto";
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
const SIGNATURE_BYTES = 16;

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

/** The codec of cursors signed with a key derived from `secret` (the token signing secret). */
export function cursorCodec(secret: Uint8Array): CursorCodec {
  const key = createHmac("sha256", secret).update("dimensio graphql keyset cursor v1").digest();
  const sign = (scope: CursorScope, values: readonly FilterLiteral[]) =>
    createHmac("sha256", key)
      .update(JSON.stringify([scopeText(scope), values]))
      .digest()
      .subarray(0, SIGNATURE_BYTES);
  return {
    encode(scope, values) {
      const v = values.map(literal);
      const s = sign(scope, v).toString("base64url");
      return Buffer.from(JSON.stringify({ v, s })).toString("base64url");
    },
    decode(scope, cursor) {
      if (cursor.length === 0 || cursor.length > MAX_CURSOR_LENGTH || !/^[A-Za-z0-9_-]+$/.test(cursor))
        throw invalidCursor("after is not a cursor of this list.");
      let payload: unknown;
      try {
        payload = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
      } catch {
        throw invalidCursor("after is not a cursor of this list.");
      }
      const { v, s } = (payload ?? {}) as { v?: unknown; s?: unknown };
      if (
        !Array.isArray(v) ||
        v.length === 0 ||
        v.length > MAX_CURSOR_VALUES ||
        !v.every(isLiteral) ||
        typeof s !== "string"
      )
        throw invalidCursor("after is not a cursor of this list.");
      const given = Buffer.from(s, "base64url");
      const expected = sign(scope, v);
      if (given.length !== expected.length || !timingSafeEqual(given, expected))
        throw invalidCursor(
          "after is a cursor of another list, sort, filter or caller (or was altered); start again without after.",
        );
      return v;
    },
  };
}
