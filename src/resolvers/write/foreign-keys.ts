// Foreign keys of AC/VARS fields (spec 4.4): the value must name a live record (TREC not C) of
// the destination dimension (TB_OBJECT) in the caller's tenant, and within the rows the caller may
// see of it (decisions.md §17: a row outside the scope is as another tenant's); otherwise 400
// INVALID_FOREIGN_KEY.
import { accessView } from "../../auth/access-view.ts";
import { scopeValuesOf } from "../../auth/row-scope.ts";
import { ident } from "../../db/sql.ts";
import { BadRequestError } from "../../errors.ts";
import { TENANT_COLUMN } from "../../metadata/data-types.ts";
import { rowScopeSql } from "../../query/compile.ts";
import type { PlannedFilter } from "../../query/types.ts";
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

/**
 * One foreign key to look up: `value` of `field` must name a live `target` record by `key`, within
 * `scope` (null: any of the tenant's).
 */
export interface KeyLookup {
  field: FieldDef;
  target: DimensionDef;
  key: string;
  value: unknown;
  scope: PlannedFilter | null;
  /** What to do when it names none, after the message (a restore's: restore the parent first). */
  advice?: string;
}

/**
 * The rows of `target` a key may name: those the caller could read (through the source that would
 * read it), or, when no source lets them read it, those its ROW_SCOPE keys let through (as a
 * cascade's). Null for an unscoped target and for the system's own writes (fixture import).
 */
function lookupScope(w: WriteContext, target: DimensionDef): PlannedFilter | null {
  if (w.trusted) return null;
  const view = accessView(w.ctx, w.model);
  const source = view.sourceFor(target.code, "read");
  const rule =
    source === null
      ? view.rowRuleThrough(target, "update", null)
      : view.rowRuleThrough(target, "read", source);
  return rule.unrestricted ? null : rule.bind(scopeValuesOf(w.ctx));
}

export function foreignKeyError(lookup: KeyLookup): BadRequestError {
  return new BadRequestError(
    "INVALID_FOREIGN_KEY",
    `${lookup.field.code}: ${JSON.stringify(lookup.value)} does not exist in ${lookup.target.code}.${lookup.advice ? ` ${lookup.advice}` : ""}`,
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
    const lookup = { field, target, key: rel.toField, value: values[field.code], scope: null };
    if (!comparable(key, lookup.value)) throw foreignKeyError(lookup);
    lookups.push({ ...lookup, scope: lookupScope(w, target) });
  }
  return lookups;
}

/**
 * The SQL expression that yields the key when it names a live record of the caller's tenant within
 * the look-up's scope, and NULL otherwise: a create's INSERT and an update's UPDATE store it in
 * place of the value, so the look-up costs no statement of its own. Its values are appended to
 * `params`. Without a scope, its text depends on the look-up's key and table only (a create
 * group's key names them: createShape in record-store.ts; a scoped look-up's create is not grouped).
 */
export function keyLookupSql(w: WriteContext, lookup: KeyLookup, params: unknown[]): string {
  const key = `t.${ident(lookup.key)}`;
  params.push(w.ctx.principal.tenantId);
  const tenant = `$${params.length}`;
  params.push(lookup.value);
  const value = `$${params.length}`;
  return `(SELECT ${key} FROM ${ident(lookup.target.tableName)} AS t WHERE t.${ident(TENANT_COLUMN)} = ${tenant} AND ${key} = ${value} AND t."TREC" <> 'C'${rowScopeSql(lookup.scope, params, tenant)} LIMIT 1)`;
}
