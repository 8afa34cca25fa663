// countRecords: GET /{dim}/count with the list filters: the count, and the filter as planned
// (TREC rule included) for adapters that show it (REST's filters_applied).
import { compileCount } from "../../query/compile.ts";
import { planCount } from "../../query/plan.ts";
import type { ListQuery } from "../../query/types.ts";
import { assertDebugAllowed, readableDimension, runQuery } from "./common.ts";
import type { ReadContext } from "./context.ts";
import type { CountResult } from "./types.ts";

export async function countRecords(rc: ReadContext, dimCode: string, query: ListQuery): Promise<CountResult> {
  const dim = readableDimension(rc, dimCode);
  if (query.debug) assertDebugAllowed(rc);
  const scope = planCount(rc.request, dim, query);
  const q = compileCount(scope);
  const rows = await runQuery<{ count: number }>(rc, q);
  return {
    count: Number(rows[0]?.count ?? 0),
    dimension: dim.code,
    filter: scope.where,
    ...(query.debug ? { debug: { sql: q.text, params: q.params } } : {}),
  };
}
