// The row scope of writes (decisions.md §17): an update or delete reaches only rows the caller's
// write grants let through (a row outside is 404, as another tenant's), a create stamps the scope
// columns from the caller's session, and a create or update whose resulting row the scope would
// not let through is 403 ROW_NOT_ALLOWED, rolled back with everything else of the write.
//
// Cascades reach a child dimension with the rule of the first TB_MENU node that serves it and lets
// the caller write it; when none does, with the child's ROW_SCOPE keys alone (the caller's own
// unit, environment or rows). A child outside the caller's scope is never touched: a key change,
// force delete or soft delete that it would leave behind (naming a key that is gone, or live
// under a cancelled record) is refused with 409 KEY_IN_USE (naming-records.ts); a restore leaves
// it cancelled.
import { accessView } from "../../auth/access-view.ts";
import { describeScope, scopeFields } from "../../auth/row-describe.ts";
import { type RowRule, scopeValuesOf } from "../../auth/row-scope.ts";
import { ident } from "../../db/sql.ts";
import { RowNotAllowedError } from "../../errors.ts";
import { TENANT_COLUMN } from "../../metadata/data-types.ts";
import { rowScopeSql } from "../../query/compile.ts";
import type { PlannedFilter } from "../../query/types.ts";
import type { DimensionDef, FieldDef, MetadataModel, RequestContext } from "../../types.ts";
import type { WriteContext } from "./context.ts";

/**
 * The rule a write of `dim` goes by: through the source when it lets the caller write `dim`, else
 * through the first node that does (a cascade), else the dimension's scope keys alone.
 */
function writeRule(ctx: RequestContext, model: MetadataModel, dim: DimensionDef): RowRule {
  const view = accessView(ctx, model);
  return view.rowRuleThrough(dim, "update", view.sourceFor(dim.code, "update"));
}

/** The row scope the caller's writes of `dim` are held to (null: every row of the tenant). */
export function callerWriteScope(
  ctx: RequestContext,
  model: MetadataModel,
  dim: DimensionDef,
): PlannedFilter | null {
  const rule = writeRule(ctx, model, dim);
  return rule.unrestricted ? null : rule.bind(scopeValuesOf(ctx));
}

/** The row scope a write of `dim` is held to (null: every row of the tenant). */
export function writeRowScope(w: WriteContext, dim: DimensionDef): PlannedFilter | null {
  return w.trusted ? null : callerWriteScope(w.ctx, w.model, dim);
}

/** ` AND (…)` over the alias `t` for the write's scope on `dim`, its values added to `params`. */
export function writeScopeSql(w: WriteContext, dim: DimensionDef, params: unknown[]): string {
  return rowScopeSql(writeRowScope(w, dim), params, "$1");
}

/**
 * The scope columns a create stamps from the caller's session (owner is the audit field's). Only
 * the system's own writes (fixture import: `w.trusted`) may give them in the record, which is how
 * seeded and migrated rows are placed in a unit.
 */
export function scopeColumns(
  w: WriteContext,
  dim: DimensionDef,
  body: Record<string, unknown>,
): Array<[string, unknown]> {
  const out: Array<[string, unknown]> = [];
  for (const k of dim.rowScope) {
    if (k.key === "owner") continue;
    const given = body[k.column];
    if (w.trusted && (typeof given === "string" || given === null)) out.push([k.column, given]);
    else
      out.push([k.column, k.key === "centro_dett" ? w.ctx.principal.centroDett : w.ctx.principal.ambiente]);
  }
  return out;
}

/**
 * After a create or update: the written row must be one the caller's scope lets through, else
 * 403 ROW_NOT_ALLOWED (the transaction rolls back: nothing written, no event).
 */
export async function requireWrittenInScope(w: WriteContext, dim: DimensionDef, id: unknown): Promise<void> {
  const scope = writeRowScope(w, dim);
  if (!scope) return;
  const params: unknown[] = [w.ctx.principal.tenantId, id];
  const where = rowScopeSql(scope, params, "$1");
  const { rows } = await w.tx.query(
    `SELECT 1 FROM ${ident(dim.tableName)} AS t WHERE t.${ident(TENANT_COLUMN)} = $1 AND t.${ident(dim.idField)} = $2${where}`,
    params,
  );
  if (rows.length) return;
  // Refused: say what the written record holds in the fields the scope names, and what the
  // caller's grants allow there (their own values and filters only; the row is their own write,
  // rolled back).
  const fields = scopeFields(scope);
  const { rows: written } = fields.length
    ? await w.tx.query<Record<string, unknown>>(
        `SELECT ${fields.map((f) => `t.${ident(f.code)}`).join(", ")} FROM ${ident(dim.tableName)} AS t WHERE t.${ident(TENANT_COLUMN)} = $1 AND t.${ident(dim.idField)} = $2`,
        [w.ctx.principal.tenantId, id],
      )
    : { rows: [] };
  const values = Object.fromEntries(fields.map((f) => [f.code, written[0]?.[f.code] ?? null]));
  const allowed = describeScope(scope);
  const held = fields.map((f) => `${f.code} ${describeValue(f, values[f.code])}`).join(", ");
  throw new RowNotAllowedError(
    `The ${dim.code} record as written${held ? ` (${held})` : ""} is outside the rows your grants let you write: ${allowed}. Nothing was written. Give it values within those rows (a record of a scoped dimension is written in your own unit and environment), or ask for a grant on this dimension with all_rows (it lifts the unit, environment and owner keys, not a ROW_FILTER).`,
    { details: { dimension: dim.code, written: values, allowed } },
  );
}

/** A written value as the scope's text shows it: text quoted, anything else as is. */
function describeValue(field: FieldDef, v: unknown): string {
  if (v === null) return "null";
  return field.dataType === "STRING" || field.dataType === "TEXT" ? `'${String(v)}'` : String(v);
}
