// What a REST list read costs, in the unit of HEAVY_REQUEST_VALUES (src/http/heavy-requests.ts):
// values the database reads or the service answers. A page is not only what it answers (issue 35
// §4): rows skipped by `$offset` are read before the page, an order no index gives reads and sorts
// every matching row before the first, and a `$group` reads every matching row. Those reads do not
// show in the page's size, so they are counted here; a request whose estimate reaches the threshold
// takes turns in its tenant's lane.
import { tableIndexes } from "../ddl/sync.ts";
import { relationRowsPerParent } from "../query/plan.ts";
import type { ListQuery, SortSpec } from "../query/types.ts";
import type { DimensionDef } from "../types.ts";

/**
 * The values a list read (`GET /api/v4/core/{dim}`, `/sort/{key}`) reads and answers:
 * - the page: rows × fields answered × (1 + records expanded per row: 1 a forward relation,
 *   DEFAULT_RELATION_ROWS a reverse one);
 * - the rows `$offset` skips: read and projected like the page's, then dropped (offset × fields);
 * - an order no index gives (its first key neither the id nor an indexed or foreign-key field):
 *   the database reads every matching row and sorts it on its keys (`scanRows` × sort keys);
 * - `$group` / aggregates: every matching row read for the group keys and aggregated values
 *   (`scanRows` × columns), twice with groups (the groups, and the count of groups for the total),
 *   plus the groups answered and skipped.
 * `scanRows` stands for "every matching row", unknown before the statement runs: the routes pass
 * COUNT_EXACT_LIMIT, the reach up to which a total is counted exactly. `dim` undefined (a
 * dimension that does not exist, answered 404 by the resolver): the page alone.
 */
export function estimateListValues(
  query: ListQuery,
  dim: DimensionDef | undefined,
  scanRows: number,
): number {
  const rows = query.numRows + query.offset;
  if (query.groupBy.length > 0 || query.aggregates.length > 0) {
    const columns = query.groupBy.length + Math.max(1, query.aggregates.length);
    const scans = query.groupBy.length > 0 ? 2 : 1;
    return rows * columns + scans * scanRows * columns;
  }
  const fields = Math.max(1, query.fields?.length ?? dim?.fields.length ?? 1);
  // Each relation expanded: its records per parent (a reverse relation's bound, issue 35 §5).
  const related = query.expand.reduce(
    (n, name) => n + (dim ? Math.max(1, relationRowsPerParent(dim, name)) : 1),
    0,
  );
  const page = query.numRows * fields * (1 + related);
  const skipped = query.offset * fields;
  const sorted = dim && !orderFromIndex(dim, query.sort) ? scanRows * query.sort.length : 0;
  return page + skipped + sorted;
}

/**
 * Whether an index of `dim` yields rows in `sort`'s order (the first key's; ties on it are few and
 * sorted incrementally): no sort (the id's order), or a first key that is the id or leads one of
 * the sync's field indexes (TENANT_ID, field, id: src/ddl/sync.ts, tableIndexes) or one of the
 * composite indexes TB_DIM.INDEXES declares (TENANT_ID, fields…, id).
 */
function orderFromIndex(dim: DimensionDef, sort: readonly SortSpec[]): boolean {
  const first = sort[0]?.field;
  if (first === undefined || first === dim.idField) return true;
  if (dim.compositeIndexes.some((fields) => fields[0] === first)) return true;
  return tableIndexes(dim).some((index) => index.columns[1] === first);
}
