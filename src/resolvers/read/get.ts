// getRecord: GET /{dim}/{id}: fields with D, $expand allowed; unknown, invisible (cancelled, or
// another tenant's) record is 404 RECORD_NOT_FOUND.
import { compileRecordsSelect } from "../../query/compile.ts";
import { planRecord } from "../../query/plan.ts";
import type { RecordQuery } from "../../query/types.ts";
import { assertDebugAllowed, readableDimension, runQuery, toRecord } from "./common.ts";
import type { ReadContext } from "./context.ts";
import { attachExpansions, expandShapes } from "./expand.ts";
import type { RecordResult } from "./types.ts";
import { recordNotFound } from "../write/record-store.ts";

export async function getRecord(
  rc: ReadContext,
  dimCode: string,
  id: string | number,
  query: RecordQuery,
): Promise<RecordResult> {
  const dim = readableDimension(rc, dimCode);
  if (query.debug) assertDebugAllowed(rc);
  // The same body as every other RECORD_NOT_FOUND (history, commands, documents, writes).
  const notFound = () => recordNotFound(dim, id);
  const plan = planRecord(rc.request, rc.model, dim, id, query);
  if (!plan) throw notFound();
  const q = compileRecordsSelect(plan, false);
  const rows = await runQuery(rc, q);
  const row = rows[0];
  if (!row) throw notFound();
  const data = toRecord(row, plan.columns);
  // Awaited only when a relation is loaded: each await is a promise and a turn of the queue.
  const loading = attachExpansions(rc, plan.expand, [row], [data]);
  if (loading) await loading;
  return {
    data,
    shape: { dim: dim.code, fields: plan.columns, expand: expandShapes(plan.expand) },
    ...(query.debug ? { debug: { sql: q.text, params: q.params } } : {}),
  };
}
