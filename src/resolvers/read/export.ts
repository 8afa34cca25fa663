// Exports (decisions §20): every row a list with the same parameters would page through, read in
// keyset pages (the sort keys and the id, as GraphQL cursors read them: compile.ts
// keysetPredicate), one statement per page through the read context's database (the tenant's read
// gate), each page asked for only when the previous one was taken: the consumer's pace (a slow
// client) sets the reads'. The plan is the list planner's (planRecords): the caller's field
// rights (L, peso), filters, `$filter`, sort, `$search`, cond_trec and the TREC rule apply as to a
// list, and so would any row rule the planner adds. Works on PostgreSQL and PGlite alike; no
// connection is held between pages.
import { compileRecordsSelect } from "../../query/compile.ts";
import { invalidParameter } from "../../query/errors.ts";
import { planRecords } from "../../query/plan.ts";
import type { ListQuery, RecordsPlan } from "../../query/types.ts";
import type { FieldDef } from "../../types.ts";
import { type DataRecord, readableDimension, runQuery, toRecords } from "./common.ts";
import type { ReadContext } from "./context.ts";

/** Rows per page of an export: 500 grew the RSS of a 1,000,000-row export less than 1,000 (docs/benchmarks.md). */
export const EXPORT_PAGE_ROWS = 500;

export interface ExportRows {
  readonly dim: string;
  /** The exported fields, in the dimension's order: what a list answers (L), or `fields`. */
  readonly columns: readonly FieldDef[];
  /** The pages, in the list's order; each read when asked for. */
  readonly pages: AsyncIterable<DataRecord[]>;
}

type Row = Record<string, unknown>;

/**
 * GET /{dim}/export: plans the list (its errors are thrown here, before any row is read) and
 * returns its pages. A grouped list or `$expand` is no export (400 INVALID_PARAMETER).
 */
export function exportRecords(
  rc: ReadContext,
  dimCode: string,
  query: ListQuery,
  pageRows = EXPORT_PAGE_ROWS,
): ExportRows {
  const dim = readableDimension(rc, dimCode);
  if (query.groupBy.length || query.aggregates.length)
    throw invalidParameter("$group", "An export lists records; $group and aggregate do not apply.");
  if (query.expand.length)
    throw invalidParameter("$expand", "An export holds the dimension's own fields; $expand does not apply.");
  const plan = planRecords(rc.request, rc.model, dim, {
    ...query,
    numRows: pageRows,
    offset: 0,
    keyset: { after: null },
  });
  return { dim: dim.code, columns: plan.columns, pages: pagesOf(rc, plan, pageRows) };
}

async function* pagesOf(rc: ReadContext, first: RecordsPlan, pageRows: number): AsyncGenerator<DataRecord[]> {
  let plan = first;
  for (;;) {
    const rows = await runQuery<Row>(rc, compileRecordsSelect(plan, true));
    const last = rows.at(-1);
    if (rows.length) yield toRecords(rows, plan.columns);
    if (!last || rows.length < pageRows) return;
    // The next page: the rows after this one's last in the sort's order (the id last).
    plan = { ...plan, keyset: { after: plan.sort.map((s) => last[s.field.code] ?? null) } };
  }
}
