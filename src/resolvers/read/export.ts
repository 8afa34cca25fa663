// Exports (decisions §20): every row a list with the same parameters would page through, read in
// keyset pages (the sort keys and the id, as GraphQL cursors read them: compile.ts
// keysetPredicate), one statement per page through the read context's database (the tenant's read
// gate), each page asked for only when the previous one was taken: the consumer's pace (a slow
// client) sets the reads'. The plan is the list planner's (planRecords): the caller's field
// rights (L, peso), filters, `$filter`, sort, `$search`, cond_trec and the TREC rule apply as to a
// list, and so would any row rule the planner adds. Works on PostgreSQL and PGlite alike; no
// connection is held between pages. The parameters are read by exportQuery, for every adapter
// (the REST route and `npm run export`), so that each refuses the same ones for the same reasons.
import { ApiError } from "../../errors.ts";
import { compileRecordsSelect } from "../../query/compile.ts";
import { invalidParameter } from "../../query/errors.ts";
import { planRecords } from "../../query/plan.ts";
import { parseListParams, type QueryParams } from "../../query/rest-params.ts";
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

const NO_LIMIT =
  "An export has no row limit nor pages: it writes every row the list matches (narrow them with filter[…], $filter or $search).";
const NO_EXPAND =
  "An export's columns are the dimension's own fields, one line per record: a related record has no column to go in (export its dimension on its own).";
const NO_GROUPS = "An export lists records, not groups: a grouped list is GET /{dim} with $group.";

/**
 * The list parameters an export does not take, each with its reason (400 INVALID_PARAMETER naming
 * it): decisions §20, an export streams every matching record with the dimension's own columns.
 */
export const NOT_FOR_EXPORT: Readonly<Record<string, string>> = {
  $num_rows: NO_LIMIT,
  $offset: NO_LIMIT,
  $count: "An export writes rows, not a count: GET /{dim}/count counts the rows a list matches.",
  $expand: NO_EXPAND,
  include: NO_EXPAND,
  $group: NO_GROUPS,
  groupBy: NO_GROUPS,
  aggregate: NO_GROUPS,
  debug:
    "An export's body is the rows alone, with no envelope to carry the generated query: GET /{dim} with the same parameters and debug=true shows it.",
};

/**
 * An export's list parameters (`format` and the adapter's own left out): those of a list
 * (src/query/rest-params.ts), `fields` as spec decisions §20 names `$fields`, and none of
 * NOT_FOR_EXPORT. Throws 400 INVALID_PARAMETER (or the list parser's error) for a refused one.
 */
export function exportQuery(params: QueryParams): ListQuery {
  for (const [name, reason] of Object.entries(NOT_FOR_EXPORT))
    if (params[name] !== undefined) throw invalidParameter(name, reason);
  if (params.fields !== undefined && (params.$fields !== undefined || params.$select !== undefined))
    throw invalidParameter("fields", "Give the columns once: fields or $fields, not both.");
  return parseListParams(
    Object.fromEntries(
      Object.entries(params).map(([name, value]) => (name === "fields" ? ["$fields", value] : [name, value])),
    ),
  );
}

/**
 * 400 FIELD_NOT_READABLE: `fields` names a field the caller may see but not list (no L, e.g. D
 * alone). A list's `$fields` leaves such a field out silently (docs/decisions.md, "Reads"); an
 * export would then write a file without the column asked for (or no column at all), which a
 * migration could not tell from a complete one.
 */
function fieldNotExportable(name: string, dim: string): ApiError {
  const shown = name.slice(0, 60);
  return new ApiError(
    400,
    "FIELD_NOT_READABLE",
    "FieldNotReadable",
    `${shown} of ${dim} may not be read in lists (a record's detail may show it), and an export's columns are the fields a list shows: leave ${shown} out of fields.`,
    { field: shown },
  );
}

/**
 * GET /{dim}/export: plans the list (its errors are thrown here, before any row is read) and
 * returns its pages. A grouped list or `$expand` is no export (400 INVALID_PARAMETER); a field
 * of `fields` that a list would leave out is refused (fieldNotExportable).
 */
export function exportRecords(
  rc: ReadContext,
  dimCode: string,
  query: ListQuery,
  pageRows = EXPORT_PAGE_ROWS,
): ExportRows {
  const dim = readableDimension(rc, dimCode);
  if (query.groupBy.length || query.aggregates.length) throw invalidParameter("$group", NO_GROUPS);
  if (query.expand.length) throw invalidParameter("$expand", NO_EXPAND);
  const plan = planRecords(rc.request, rc.model, dim, {
    ...query,
    numRows: pageRows,
    offset: 0,
    keyset: { after: null },
  });
  for (const name of query.fields ?? []) {
    const field = dim.rules.visibleField(name);
    if (field && !plan.columns.includes(field)) throw fieldNotExportable(name, dim.code);
  }
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
