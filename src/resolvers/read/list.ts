// listRecords: GET /{dim} (and named sorts): one statement for the page and its total, then one
// batched query per expanded relation.
import { NotFoundError } from "../../errors.ts";
import {
  aggregateAlias,
  compileCountEstimate,
  compileGroupsPage,
  compileRecordsPage,
  compileRecordsSelect,
  compileScope,
  countKey,
  countScopeOf,
  type ScopeSql,
  groupAlias,
  groupKeyTextAlias,
} from "../../query/compile.ts";
import { type PlanOptions, planList } from "../../query/plan.ts";
import { parseSortExpression } from "../../query/sort-syntax.ts";
import {
  type CompiledQuery,
  type GroupsPlan,
  groupKeyAsText,
  type ListQuery,
  type RecordsPlan,
} from "../../query/types.ts";
import { assertDebugAllowed, type DataRecord, readableDimension, runQuery, toRecords } from "./common.ts";
import type { ReadContext } from "./context.ts";
import { attachExpansions, expandShapes } from "./expand.ts";
import type { ListMeta, ListResult } from "./types.ts";

type Row = Record<string, unknown>;

function meta(total: number, plan: { limit: number; offset: number }, returned: number): ListMeta {
  return { total, num_rows: plan.limit, offset: plan.offset, has_more: plan.offset + returned < total };
}

/** A page without its total: one row more than asked tells whether there is more. */
async function pageWithoutTotal(rc: ReadContext, plan: RecordsPlan) {
  const q = compileRecordsSelect({ ...plan, limit: plan.limit + 1 }, true, { embed: true });
  const rows = await runQuery<Row>(rc, q);
  const page = rows.slice(0, plan.limit);
  const listMeta: ListMeta = {
    total: null,
    num_rows: plan.limit,
    offset: plan.offset,
    has_more: rows.length > plan.limit,
  };
  return { q, page, listMeta };
}

/** The planner's estimate of the rows a plan matches (EXPLAIN's "Plan Rows"). */
async function estimateCount(rc: ReadContext, plan: RecordsPlan, scope: ScopeSql): Promise<number> {
  const q = compileCountEstimate(plan, scope);
  const rows = await runQuery<Record<string, unknown>>(rc, q);
  const raw = rows[0]?.["QUERY PLAN"];
  const plans = (typeof raw === "string" ? JSON.parse(raw) : raw) as Array<{
    Plan?: { "Plan Rows"?: number };
  }>;
  return Math.round(Number(plans?.[0]?.Plan?.["Plan Rows"] ?? 0));
}

/**
 * The page and its total (decisions §11): exact when at most the count bound match (or with
 * `$count=exact`), else the planner's estimate, flagged `total_estimated` (never below what the
 * bounded count saw).
 */
async function pageWithTotal(rc: ReadContext, plan: RecordsPlan, exact: boolean, debug: boolean) {
  const bound = exact ? null : rc.countBound;
  // A total counted for an earlier page of the same filter, no write since: the page alone.
  const scope = compileScope(plan);
  const key = debug
    ? null
    : countKey(plan, scope, bound === null ? "exact" : `bound ${bound}`, rc.model.version);
  const kept = key ? rc.totals.get(key) : undefined;
  if (kept) {
    const q = compileRecordsSelect(plan, true, { embed: true, scope });
    const page = await runQuery<Row>(rc, q);
    if (!kept.estimated) return { q, page, listMeta: meta(kept.total, plan, page.length) };
    // As when it was estimated: never below what this page shows.
    const total = Math.max(kept.total, plan.offset + page.length);
    const estimated: ListMeta = { ...meta(total, plan, page.length), total_estimated: true };
    return { q, page, listMeta: estimated };
  }
  const mark = rc.totals.mark();
  const q = compileRecordsPage(plan, bound, { embed: true, scope });
  const rows = await runQuery<Row>(rc, q);
  const page = rows.filter((r) => r[plan.dim.idField] !== null && r[plan.dim.idField] !== undefined);
  const counted = Number(rows[0]?.__total ?? 0);
  if (bound === null || counted <= bound) {
    if (key) rc.totals.set(key, { total: counted, estimated: false }, mark, countScopeOf(plan));
    return { q, page, listMeta: meta(counted, plan, page.length) };
  }
  const total = Math.max(await estimateCount(rc, plan, scope), counted, plan.offset + page.length);
  if (key) rc.totals.set(key, { total, estimated: true }, mark, countScopeOf(plan));
  const estimated: ListMeta = { ...meta(total, plan, page.length), total_estimated: true };
  return { q, page, listMeta: estimated };
}

function debugOf(q: CompiledQuery, wanted: boolean) {
  return wanted ? { debug: { sql: q.text, params: q.params } } : {};
}

/**
 * A cursor page (decisions §21): the rows after the keyset, one more than asked telling has_more
 * (pageWithoutTotal does so already); the total, when wanted, is the whole filtered set's.
 */
async function keysetPage(rc: ReadContext, plan: RecordsPlan, query: ListQuery) {
  if (!query.withTotal) return pageWithoutTotal(rc, plan);
  const {
    q,
    page: rows,
    listMeta,
  } = await pageWithTotal(rc, { ...plan, limit: plan.limit + 1 }, query.exactCount, query.debug);
  const page = rows.slice(0, plan.limit);
  const has_more = rows.length > plan.limit;
  return { q, page, listMeta: { ...listMeta, num_rows: plan.limit, offset: 0, has_more } };
}

/** The values of the planned sort keys in the page's last row (null for an empty page). */
function endKeyOf(plan: RecordsPlan, page: readonly Row[]): unknown[] | null {
  const last = page.at(-1);
  return last ? plan.sort.map((s) => last[s.field.code] ?? null) : null;
}

async function listPlainRecords(rc: ReadContext, plan: RecordsPlan, query: ListQuery): Promise<ListResult> {
  const { q, page, listMeta } = plan.keyset
    ? await keysetPage(rc, plan, query)
    : query.withTotal
      ? await pageWithTotal(rc, plan, query.exactCount, query.debug)
      : await pageWithoutTotal(rc, plan);
  const endKey = endKeyOf(plan, page);
  const data = toRecords(page, plan.columns);
  // Forward relations came with the page's statement; the others cost one query each.
  const loading = attachExpansions(rc, plan.expand, page, data, { joined: true });
  if (loading) await loading;
  return {
    kind: "records",
    data,
    meta: listMeta,
    shape: { dim: plan.dim.code, fields: plan.columns, expand: expandShapes(plan.expand) },
    endKey,
    ...debugOf(q, query.debug),
  };
}

/**
 * A page of groups with their total (the groups counted), or without it (`$count=none`): then one
 * group more than asked tells whether there is more, as for a page of records. A cursor page
 * (GraphQL `first`/`after`, decisions §21) reads one group more in any case: its total is the
 * whole grouping's, which says nothing of what follows the cursor.
 */
async function listGroups(rc: ReadContext, plan: GroupsPlan, query: ListQuery): Promise<ListResult> {
  const { withTotal, debug } = query;
  const extra = plan.keyset !== undefined || !withTotal;
  const endKey = query.endKey === true;
  const q = compileGroupsPage(extra ? { ...plan, limit: plan.limit + 1 } : plan, withTotal, { endKey });
  const rows = await runQuery<Row>(rc, q);
  const total = Number(rows[0]?.__total ?? 0);
  const groups = rows.filter((r) => r.__row === true);
  const page = extra ? groups.slice(0, plan.limit) : groups;
  const data = page.map((r) => {
    const out: DataRecord = {};
    plan.groupBy.forEach((f, i) => {
      out[f.code] = r[groupAlias(i)] ?? null;
    });
    plan.aggregates.forEach((a, i) => {
      out[a.alias] = r[aggregateAlias(i)] ?? null;
    });
    return out;
  });
  const has_more = groups.length > plan.limit;
  const listMeta: ListMeta = plan.keyset
    ? { total: withTotal ? total : null, num_rows: plan.limit, offset: 0, has_more }
    : withTotal
      ? meta(total, plan, data.length)
      : { total: null, num_rows: plan.limit, offset: plan.offset, has_more };
  return {
    kind: "groups",
    data,
    meta: listMeta,
    shape: { dim: plan.dim.code, groupBy: plan.groupBy, aggregates: plan.aggregates },
    ...(endKey || plan.keyset ? { endKey: groupEndKey(plan, page) } : {}),
    ...debugOf(q, debug),
  };
}

/**
 * The values of a grouped page's sort keys in its last group (what its end_cursor encodes; null
 * for an empty page): COUNT, SUM and AVG as the text they were read as, the others as read. Every
 * group field is a sort key, so they name the group; without any (no group fields: one group at
 * most), `true`, the whole set's one group.
 */
function groupEndKey(plan: GroupsPlan, page: readonly Row[]): unknown[] | null {
  const last = page.at(-1);
  if (!last) return null;
  if (!plan.sort.length) return [true];
  return plan.sort.map(({ key }, i) => {
    if (groupKeyAsText(key)) return last[groupKeyTextAlias(i)] ?? null;
    return key.kind === "field"
      ? (last[groupAlias(plan.groupBy.indexOf(key.field))] ?? null)
      : (last[aggregateAlias(plan.aggregates.indexOf(key.aggregate))] ?? null);
  });
}

export async function listRecords(
  rc: ReadContext,
  dimCode: string,
  query: ListQuery,
  opts: PlanOptions = {},
): Promise<ListResult> {
  const dim = readableDimension(rc, dimCode);
  if (query.debug) assertDebugAllowed(rc);
  const plan = planList(rc.request, rc.model, dim, query, opts);
  return plan.kind === "records" ? listPlainRecords(rc, plan, query) : listGroups(rc, plan, query);
}

/** GET /{dim}/sort/{sort_key}: a list ordered by the dimension's TB_SORT expression. */
export async function listRecordsBySort(
  rc: ReadContext,
  dimCode: string,
  sortKey: string,
  query: ListQuery,
): Promise<ListResult> {
  const dim = readableDimension(rc, dimCode);
  const named = dim.sorts.get(sortKey);
  if (!named)
    throw new NotFoundError("SORT_NOT_FOUND", `${dim.code} has no named sort ${sortKey.slice(0, 60)}.`);
  return listRecords(rc, dimCode, { ...query, sort: parseSortExpression(named.expr) }, { trustedSort: true });
}
