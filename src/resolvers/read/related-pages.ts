// Pages of a child dimension for many parents at once (GraphQL reverse relations with their own
// where / order_by / limit / offset): one statement for every parent of a field, whatever their
// number, with the grants, visibility and TREC rule of a list read.
import { authorizeRead } from "../../auth/authorize.ts";
import { relatedRequest } from "../../query/access.ts";
import { compilePartitionedPages } from "../../query/compile.ts";
import { planList } from "../../query/plan.ts";
import type { ListQuery } from "../../query/types.ts";
import { type DataRecord, runQuery, toRecord } from "./common.ts";
import type { ReadContext } from "./context.ts";

export async function listRelatedPages(
  rc: ReadContext,
  childDim: string,
  parentKeyField: string,
  keys: readonly (string | number)[],
  query: ListQuery,
): Promise<DataRecord[][]> {
  // Like $expand: through the request's source, or a menu node serving the child the caller reads.
  const request = relatedRequest(rc.request, rc.model, childDim, childDim);
  const dim = authorizeRead(request, rc.model, childDim);
  const plan = planList(request, rc.model, dim, { ...query, expand: [], withTotal: false });
  if (plan.kind !== "records") throw new Error("a relation's page is a list of records");
  const partition = dim.fieldsByCode.get(parentKeyField);
  if (!partition) throw new Error(`${childDim} has no field ${parentKeyField}`);
  const rows = await runQuery<Record<string, unknown>>(rc, compilePartitionedPages(plan, partition, keys));
  const byKey = new Map<string, DataRecord[]>();
  for (const row of rows) {
    const k = String(row.__parent);
    const record = toRecord(row, plan.columns);
    const list = byKey.get(k);
    if (list) list.push(record);
    else byKey.set(k, [record]);
  }
  return keys.map((k) => byKey.get(String(k)) ?? []);
}
