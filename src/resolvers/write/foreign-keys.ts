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

/** Checks the AC/VARS fields of `values` (only those in `only`, when given). */
export async function checkForeignKeys(
  w: WriteContext,
  dim: DimensionDef,
  values: Record<string, unknown>,
  only?: ReadonlySet<string>,
): Promise<void> {
  for (const field of dim.fields) {
    if (!field.fkKind || isBlank(values[field.code])) continue;
    if (only && !only.has(field.code)) continue;
    const rel = dim.relations.find((r) => r.fromField === field.code);
    const target = rel ? w.model.dimensions.get(rel.toDim) : undefined;
    const key = rel && target ? target.fieldsByCode.get(rel.toField) : undefined;
    if (!rel || !target || !key) continue;
    const value = values[field.code];
    const found =
      comparable(key, value) &&
      (
        await w.tx.query(
          `SELECT 1 FROM ${ident(target.tableName)} WHERE ${ident(TENANT_COLUMN)} = $1 AND ${ident(rel.toField)} = $2 AND "TREC" <> 'C' LIMIT 1`,
          [w.ctx.principal.tenantId, value],
        )
      ).rows.length > 0;
    if (!found) {
      throw new BadRequestError(
        "INVALID_FOREIGN_KEY",
        `${field.code}: ${JSON.stringify(value)} does not exist in ${target.code}.`,
        { field: field.code },
      );
    }
  }
}
