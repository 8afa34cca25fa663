// The sort expression syntax shared by REST's `sort` parameter, TB_SORT.SORT_EXPR (named sorts)
// and GraphQL's `sort` argument: comma-separated fields, `-` for descending (`NAME,-CDATA`).
import type { SortSpec } from "./types.ts";

export function parseSortExpression(value: string): SortSpec[] {
  return value
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "")
    .map((item) =>
      item.startsWith("-")
        ? { field: item.slice(1).trim(), direction: "desc" as const }
        : { field: item.replace(/^\+/, "").trim(), direction: "asc" as const },
    );
}
