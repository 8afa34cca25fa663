// TB_DIM.INDEXES: the composite indexes a tenant admin declares on a dimension table
// (docs/decisions.md, "Composite indexes declared in metadata"). `CITY_ID,NAME;VIP,CREDIT_LIMIT`
// declares two; each becomes an index on (TENANT_ID, fields…, id), made and dropped by the DDL sync.
import type { MetadataRows, Problem } from "../types.ts";
import { AUDIT_FIELDS, normalizeDataType, TENANT_COLUMN } from "./data-types.ts";

/** Fields one composite index may name (TENANT_ID and the id come on top). */
export const MAX_INDEX_FIELDS = 5;
/** Composite indexes one dimension may declare: each slows every write of the table. */
export const MAX_COMPOSITE_INDEXES = 8;

/** The indexes of an INDEXES value, each a list of trimmed field codes (empty entries kept). */
export function parseCompositeIndexes(value: string | null | undefined): string[][] {
  return (value ?? "")
    .split(";")
    .filter((ix) => ix.trim() !== "")
    .map((ix) => ix.split(",").map((f) => f.trim()));
}

/** Types whose values may exceed an index entry (as for TB_VAR.INDEXED). */
const UNINDEXABLE = new Set(["TEXT", "JSON", "MEDIA"]);

/** Problems of each TB_DIM row's INDEXES against its fields (TB_VAR rows and audit fields). */
export function compositeIndexProblems(rows: MetadataRows): Problem[] {
  const problems: Problem[] = [];
  rows.TB_DIM.forEach((d, i) => {
    if (d.INDEXES == null) return;
    const path = `TB_DIM[${i}].INDEXES`;
    const add = (message: string) => {
      problems.push({ path, message });
    };
    const types = new Map<string, string | null>();
    for (const v of rows.TB_VAR)
      if (v.COD_DIM === d.COD_DIM) types.set(v.COD_VAR, normalizeDataType(String(v.DATA_TYPE)));
    for (const a of AUDIT_FIELDS[d.AUDIT_STYLE === "CREATED" ? "CREATED" : "TREC"]) types.set(a.code, a.type);
    const indexes = parseCompositeIndexes(d.INDEXES);
    if (indexes.length > MAX_COMPOSITE_INDEXES)
      add(`declares ${indexes.length} indexes; at most ${MAX_COMPOSITE_INDEXES}`);
    const seen = new Set<string>();
    for (const fields of indexes) {
      const label = `index ${fields.join(",")}`;
      if (fields.some((f) => f === "")) {
        add(`${label} has an empty field name (fields are separated by commas, indexes by semicolons)`);
        continue;
      }
      if (fields.length < 2)
        add(
          `${label} names one field: a composite index names 2 to ${MAX_INDEX_FIELDS} (declare TB_VAR.INDEXED for one)`,
        );
      if (fields.length > MAX_INDEX_FIELDS)
        add(`${label} names ${fields.length} fields; at most ${MAX_INDEX_FIELDS}`);
      const inIndex = new Set<string>();
      for (const f of fields) {
        if (inIndex.has(f)) add(`${label} names ${f} twice`);
        inIndex.add(f);
        if (f === TENANT_COLUMN) add(`${label} names ${f}, which leads every index already`);
        else if (f === d.ID_FIELD) add(`${label} names the id field ${f}, which closes every index already`);
        else if (!types.has(f)) add(`${label} names ${f}, which is not a field of ${d.COD_DIM}`);
        else {
          const type = types.get(f);
          if (type && UNINDEXABLE.has(type))
            add(
              `${label} names ${f}, a ${type} field, which cannot be indexed (values may exceed an index entry)`,
            );
        }
      }
      const key = fields.join(",");
      if (seen.has(key)) add(`${label} is declared twice`);
      seen.add(key);
    }
  });
  return problems;
}
