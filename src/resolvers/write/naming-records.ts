// Records that name a value through their foreign key (referential integrity, tenant-wide,
// cancelled records too: a restore brings them back). A change that would leave them naming
// nothing is refused with 409 KEY_IN_USE: a key change outside UPDATE_CASCADE (update.ts), a force
// delete outside CASCADE_DELETE (delete.ts).
import { ident } from "../../db/sql.ts";
import { ConflictError } from "../../errors.ts";
import { TENANT_COLUMN } from "../../metadata/data-types.ts";
import type { DimensionDef } from "../../types.ts";
import type { WriteContext } from "./context.ts";
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
 * Refuses a change that would leave records naming nothing: for each reverse relation of `dim`
 * whose dimension is not `spared` (the ones the change carries along: CASCADE_DELETE,
 * UPDATE_CASCADE), the value the change takes away (`valueLost`: undefined when it keeps it) is
 * counted among that dimension's records, and any found is 409 KEY_IN_USE with `advice`.
 */
export async function refuseOrphaning(
  w: WriteContext,
  dim: DimensionDef,
  change: {
    spared: readonly string[];
    valueLost: (rel: Relation) => unknown;
    advice: (rel: Relation) => string;
  },
): Promise<void> {
  for (const rel of dim.reverseRelations) {
    if (change.spared.includes(rel.fromDim)) continue;
    const value = change.valueLost(rel);
    const child = w.model.dimensions.get(rel.fromDim);
    if (value === undefined || isBlank(value) || !child) continue;
    const n = await countNaming(w, child, rel, value);
    if (n > 0) throw keyInUse(dim, rel, value, n, change.advice(rel));
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
