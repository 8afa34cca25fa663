// Steps every read resolver shares: finding the dimension, checking the grant, running SQL.
import { type AuthorizedDimension, authorizeRead, permissionDenied } from "../../auth/authorize.ts";
import { NotFoundError } from "../../errors.ts";
import type { CompiledQuery } from "../../query/types.ts";
import type { DimensionDef, FieldDef } from "../../types.ts";
import type { ReadContext } from "./context.ts";

export interface DebugInfo {
  sql: string;
  params: readonly unknown[];
}

export const DEBUG_LEVEL = 4;

/** The dimension, or 404 DIMENSION_NOT_FOUND. */
export function requireDimension(rc: ReadContext, code: string): DimensionDef {
  const dim = rc.model.dimensions.get(code);
  if (!dim) throw new NotFoundError("DIMENSION_NOT_FOUND", `Dimension ${code.slice(0, 60)} does not exist.`);
  return dim;
}

/** The dimension, after the read grant on the request's source (403 otherwise): the planner's proof. */
export function readableDimension(rc: ReadContext, code: string): AuthorizedDimension<"read"> {
  return authorizeRead(rc.request, rc.model, code, rc.view);
}

/** debug=true shows SQL: level 4 on the source only. */
export function assertDebugAllowed(rc: ReadContext): void {
  const level = rc.view.sourceLevel;
  if (level < DEBUG_LEVEL) {
    throw permissionDenied(
      rc.request.principal,
      `debug=true needs level ${DEBUG_LEVEL} on ${rc.request.source}; the grant gives ${level}.`,
      DEBUG_LEVEL,
    );
  }
}

/**
 * Runs a compiled statement. Values are checked before they get here; should the database still
 * refuse one, src/db/errors.ts maps the failure (a data exception is a 400, never a 500).
 */
export async function runQuery<R = Record<string, unknown>>(rc: ReadContext, q: CompiledQuery): Promise<R[]> {
  return (await rc.db.query<R>(q.text, q.params, { prepare: rc.model.version, plan: q.plan })).rows;
}

export type DataRecord = Record<string, unknown>;

/**
 * A page's rows as records holding only `fields`: the rows themselves when each holds exactly
 * those columns (the statement selected nothing else: no sort key, relation key, embedded relation
 * or total beside them), else copies (toRecord). The driver's row objects are the caller's.
 */
export function toRecords(rows: Array<Record<string, unknown>>, fields: readonly FieldDef[]): DataRecord[] {
  if (rows.length === 0 || columnsAre(rows[0]!, fields)) return rows;
  return rows.map((row) => toRecord(row, fields));
}

function columnsAre(row: Record<string, unknown>, fields: readonly FieldDef[]): boolean {
  let n = 0;
  for (const key in row) {
    if (n >= fields.length || key !== fields[n]!.code) return false;
    n++;
  }
  return n === fields.length;
}

/** A table row as a record holding only `fields` (hidden helper columns and TENANT_ID left out). */
export function toRecord(row: Record<string, unknown>, fields: readonly FieldDef[]): DataRecord {
  const out: DataRecord = {};
  for (const f of fields) {
    const v = row[f.code];
    out[f.code] = v === undefined ? null : v;
  }
  return out;
}
