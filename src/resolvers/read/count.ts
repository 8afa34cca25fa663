// countRecords: GET /{dim}/count with the list filters: the count, and the filter as planned
// (TREC rule included) for adapters that show it (REST's filters_applied).
import { compileCount, compileScope, countKey, countScopeOf } from "../../query/compile.ts";
import { planCount } from "../../query/plan.ts";
import type { ListQuery } from "../../query/types.ts";
import { assertDebugAllowed, readableDimension, runQuery } from "./common.ts";
import type { ReadContext } from "./context.ts";
import type { CountResult } from "./types.ts";

export async function countRecords(rc: ReadContext, dimCode: string, query: ListQuery): Promise<CountResult> {
  const dim = readableDimension(rc, dimCode);
  if (query.debug) assertDebugAllowed(rc);
  const scope = planCount(rc.request, dim, query);
  const sql = compileScope(scope);
  const q = compileCount(scope, sql);
  const key = query.debug ? null : countKey(scope, sql, "exact", rc.model.version);
  const kept = key ? rc.totals.get(key) : undefined;
  let count: number;
  if (kept) count = kept.total;
  else {
    const mark = rc.totals.mark();
    const rows = await runQuery<{ count: number }>(rc, q);
    count = Number(rows[0]?.count ?? 0);
    if (key) rc.totals.set(key, { total: count, estimated: false }, mark, countScopeOf(scope));
  }
  return {
    count,
    dimension: dim.code,
    filter: scope.where,
    ...(query.debug ? { debug: { sql: q.text, params: q.params } } : {}),
  };
}
