// TB_DIM.ROW_SCOPE (decisions.md §17): which scope keys restrict a dimension's rows, and the column
// holding each. centro_dett and ambiente get system columns of their own (CENTRO_DETT, AMBIENTE,
// made by the DDL sync, set on create from the caller's session); owner reads the audit field the
// create already sets (OWNER, or CREATED_BY under AUDIT_STYLE CREATED).
import { ROW_SCOPE_KEYS, type RowScopeKey, type RowScopeKeyName } from "../types.ts";

/** The system columns ROW_SCOPE adds, by key (owner adds none: it reads the audit field). */
export const ROW_SCOPE_COLUMNS: Readonly<Record<"centro_dett" | "ambiente", string>> = {
  centro_dett: "CENTRO_DETT",
  ambiente: "AMBIENTE",
};

/** The raw entries of a ROW_SCOPE value, trimmed and lower-cased (empty entries dropped). */
function entries(value: string | null | undefined): string[] {
  if (value == null) return [];
  return value
    .split(",")
    .map((k) => k.trim().toLowerCase())
    .filter((k) => k !== "");
}

/**
 * A ROW_SCOPE value as it is stored: its entries trimmed and lower-cased, as the keys are defined,
 * joined by commas (`" Centro_Dett , OWNER"` → `"centro_dett,owner"`). What is read is the same
 * either way (parseRowScope); what is stored, shown and compared is one spelling. A value naming
 * no key stays empty, for rowScopeProblems to refuse.
 */
export function canonicalRowScope(value: string): string {
  return entries(value).join(",");
}

const isKey = (k: string): k is RowScopeKeyName => (ROW_SCOPE_KEYS as readonly string[]).includes(k);

/** The scope keys of a valid ROW_SCOPE value, in the order written, each with its column. */
export function parseRowScope(
  value: string | null | undefined,
  auditStyle: "TREC" | "CREATED",
): RowScopeKey[] {
  return entries(value)
    .filter(isKey)
    .map((key) => ({
      key,
      column: key === "owner" ? (auditStyle === "CREATED" ? "CREATED_BY" : "OWNER") : ROW_SCOPE_COLUMNS[key],
    }));
}

/** Problems of each TB_DIM row's ROW_SCOPE: unknown or repeated keys, a field already named so. */
export function rowScopeProblems(rows: {
  TB_DIM: ReadonlyArray<{ COD_DIM: string; ROW_SCOPE?: string | null }>;
  TB_VAR: ReadonlyArray<{ COD_DIM: string; COD_VAR: string }>;
}): Array<{ path: string; message: string }> {
  const problems: Array<{ path: string; message: string }> = [];
  rows.TB_DIM.forEach((d, i) => {
    if (d.ROW_SCOPE == null) return;
    const path = `TB_DIM[${i}].ROW_SCOPE`;
    const keys = entries(d.ROW_SCOPE);
    if (!keys.length)
      problems.push({ path, message: "names no scope key; give null for an unscoped dimension" });
    const seen = new Set<string>();
    for (const k of keys) {
      if (!isKey(k))
        problems.push({
          path,
          message: `${JSON.stringify(k.slice(0, 40))} is not a scope key (keys: ${ROW_SCOPE_KEYS.join(", ")})`,
        });
      else if (seen.has(k)) problems.push({ path, message: `names ${k} twice` });
      seen.add(k);
      if (k === "centro_dett" || k === "ambiente") {
        const column = ROW_SCOPE_COLUMNS[k];
        if (rows.TB_VAR.some((v) => v.COD_DIM === d.COD_DIM && v.COD_VAR === column))
          problems.push({
            path,
            message: `${k} needs the system column ${column}, which ${d.COD_DIM} has as a field already; rename the field`,
          });
      }
    }
  });
  return problems;
}
