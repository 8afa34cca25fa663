// Foreign keys of AC/VARS fields (spec 4.4): the value must name a live record (TREC not C) of
// the destination dimension (TB_OBJECT) in the caller's tenant; otherwise 400 INVALID_FOREIGN_KEY.
import { ident } from "../../db/sql.ts";
import { BadRequestError } from "../../errors.ts";
import { TENANT_COLUMN } from "../../metadata/data-types.ts";
import type { DimensionDef, FieldDef } from "../../types.ts";
import type { WriteContext } from "./context.ts";

function isBlank(v: unknown): boolean {
  return v === undefined || v === null || v === "";
}

/** Whether `value` can be compared with the key field without a database type error. */
function comparable(key: FieldDef, value: unknown): boolean {
  if (key.dataType === "INTEGER") return typeof value === "number" && Number.isSafeInteger(value);
  return typeof value === "string";
}

/** One foreign key to look up: `value` of `field` must name a live `target` record by `key`. */
export interface KeyLookup {
  field: FieldDef;
  target: DimensionDef;
  key: string;
  value: unknown;
}

export function foreignKeyError(lookup: KeyLookup): BadRequestError {
  return new BadRequestError(
    "INVALID_FOREIGN_KEY",
    `${lookup.field.code}: ${JSON.stringify(lookup.value)} does not exist in ${lookup.target.code}.`,
    { field: lookup.field.code },
  );
}

/**
 * The AC/VARS fields of `values` to look up (only those in `only`, when given). A value the key
 * field cannot hold names no record: refused here, without a query.
 */
export function foreignKeyLookups(
  w: WriteContext,
  dim: DimensionDef,
  values: Record<string, unknown>,
  only?: ReadonlySet<string>,
): KeyLookup[] {
  const lookups: KeyLookup[] = [];
  for (const field of dim.fields) {
    if (!field.fkKind || isBlank(values[field.code])) continue;
    if (only && !only.has(field.code)) continue;
    const rel = dim.relations.find((r) => r.fromField === field.code);
    const target = rel ? w.model.dimensions.get(rel.toDim) : undefined;
    const key = rel && target ? target.fieldsByCode.get(rel.toField) : undefined;
    if (!rel || !target || !key) continue;
    const lookup = { field, target, key: rel.toField, value: values[field.code] };
    if (!comparable(key, lookup.value)) throw foreignKeyError(lookup);
    lookups.push(lookup);
  }
  return lookups;
}

/**
 * The SQL expression that yields the key when it names a live record of the caller's tenant, and
 * NULL otherwise: a create's INSERT and an update's UPDATE store it in place of the value, so the
 * look-up costs no statement of its own. Its text depends on the look-up's key and table only (a
 * create group's key names them: createShape in record-store.ts).
 */
export function keyLookupSql(w: WriteContext, lookup: KeyLookup, param: (v: unknown) => string): string {
  const key = ident(lookup.key);
  return `(SELECT ${key} FROM ${ident(lookup.target.tableName)} WHERE ${ident(TENANT_COLUMN)} = ${param(
    w.ctx.principal.tenantId,
  )} AND ${key} = ${param(lookup.value)} AND "TREC" <> 'C' LIMIT 1)`;
}
