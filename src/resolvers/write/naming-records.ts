// Records that name a value through their foreign key (referential integrity, tenant-wide,
// cancelled records too: a restore brings them back). A change that would leave them naming
// nothing is refused with 409 KEY_IN_USE: a key change outside UPDATE_CASCADE (update.ts), a force
// delete outside CASCADE_DELETE (delete.ts). A cascade reaches only the children the caller may
// write (row scope, decisions.md §17): children of a cascaded dimension outside that scope would
// be left behind (naming a key that is gone, or live under a cancelled record), so they refuse the
// change the same way, and a caller whose grant covers them (all_rows) makes it.
import { ident } from "../../db/sql.ts";
import { ConflictError } from "../../errors.ts";
import { TENANT_COLUMN } from "../../metadata/data-types.ts";
import type { DimensionDef } from "../../types.ts";
import type { WriteContext } from "./context.ts";
import { writeScopeSql } from "./row-scope.ts";
import { isBlank } from "./values.ts";

/** At most this many naming records are counted (the answer says "or more"). */
const COUNTED = 1000;

type Relation = DimensionDef["reverseRelations"][number];

/** How many records of `child` name `value` through `rel` (at most COUNTED). */
export async function countNaming(
  w: WriteContext,
  child: DimensionDef,
  rel: Relation,
  value: unknown,
): Promise<number> {
  const { rows } = await w.tx.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM (SELECT 1 FROM ${ident(child.tableName)} WHERE ${ident(TENANT_COLUMN)} = $1 AND ${ident(rel.fromField)} = $2 LIMIT ${COUNTED}) AS named`,
    [w.ctx.principal.tenantId, value],
  );
  return rows[0]?.n ?? 0;
}

/**
 * Whether a record of `child` outside the caller's write scope names `value` through `rel` (only
 * live ones, not cancelled, when `liveOnly`): one a cascade would not reach. Always false for a
 * caller whose writes of `child` reach every row (an unscoped dimension, all_rows, the import).
 */
async function namedOutOfScope(
  w: WriteContext,
  child: DimensionDef,
  rel: Relation,
  value: unknown,
  liveOnly: boolean,
): Promise<boolean> {
  const params: unknown[] = [w.ctx.principal.tenantId, value];
  const scope = writeScopeSql(w, child, params);
  if (!scope) return false;
  // `(TRUE AND (scope)) IS NOT TRUE`: a row the scope does not let through, NULL included.
  const { rows } = await w.tx.query(
    `SELECT 1 FROM ${ident(child.tableName)} AS t WHERE t.${ident(TENANT_COLUMN)} = $1 AND t.${ident(rel.fromField)} = $2${liveOnly ? ` AND t."TREC" <> 'C'` : ""} AND (TRUE${scope}) IS NOT TRUE LIMIT 1`,
    params,
  );
  return rows.length > 0;
}

/**
 * Refuses a change that would leave records naming nothing, or half of a cascade undone: for each
 * reverse relation of `dim`, the value the change takes away (`valueLost`: undefined when it keeps
 * it) is looked for among the records of that dimension. Those of a dimension the change does not
 * carry along (not in `carried`: CASCADE_DELETE, UPDATE_CASCADE) count when `others` (the default;
 * a soft delete leaves them naming a record that stays); those of a `carried` one count when
 * outside the caller's write scope (the cascade cannot reach them). Any found is 409 KEY_IN_USE
 * with `advice` (its second argument: whether it is the scope's).
 */
export async function refuseOrphaning(
  w: WriteContext,
  dim: DimensionDef,
  change: {
    carried: readonly string[];
    others?: boolean;
    /** Only live records (TREC not C) count: a soft delete leaves cancelled children as they are. */
    liveOnly?: boolean;
    valueLost: (rel: Relation) => unknown;
    advice: (rel: Relation, outOfScope: boolean) => string;
  },
): Promise<void> {
  for (const rel of dim.reverseRelations) {
    const carried = change.carried.includes(rel.fromDim);
    if (!carried && change.others === false) continue;
    const value = change.valueLost(rel);
    const child = w.model.dimensions.get(rel.fromDim);
    if (value === undefined || isBlank(value) || !child) continue;
    if (carried) {
      if (await namedOutOfScope(w, child, rel, value, change.liveOnly ?? false))
        throw keyInUseOutOfScope(dim, rel, value, change.advice(rel, true));
      continue;
    }
    const n = await countNaming(w, child, rel, value);
    if (n > 0) throw keyInUse(dim, rel, value, n, change.advice(rel, false));
  }
}

/** 409 KEY_IN_USE: `n` records of `rel.fromDim` name `value` of `dim`; `advice` says what to do. */
export function keyInUse(
  dim: DimensionDef,
  rel: Relation,
  value: unknown,
  n: number,
  advice: string,
): ConflictError {
  return new ConflictError(
    "KEY_IN_USE",
    `${dim.code}.${rel.toField} ${JSON.stringify(value)} is named by ${n === COUNTED ? `${COUNTED} or more` : n} ${rel.fromDim} record(s) (${rel.fromField}), ${advice}`,
    { field: rel.toField, details: { dimension: rel.fromDim, field: rel.fromField, records: n } },
  );
}

/**
 * 409 KEY_IN_USE for records of `rel.fromDim` outside the caller's write scope: named as a
 * dimension and field only (how many, and which, are another unit's to know).
 */
function keyInUseOutOfScope(dim: DimensionDef, rel: Relation, value: unknown, advice: string): ConflictError {
  return new ConflictError(
    "KEY_IN_USE",
    `${dim.code}.${rel.toField} ${JSON.stringify(value)} is named by ${rel.fromDim} records (${rel.fromField}) outside the rows you may write, ${advice}`,
    { field: rel.toField, details: { dimension: rel.fromDim, field: rel.fromField, scope: "outside" } },
  );
}
