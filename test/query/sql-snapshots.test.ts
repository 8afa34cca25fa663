// The SQL generated for a table of requests, checked into test/fixtures/sql so that any change to
// the compiler shows in review. Pure: the sample metadata as a model, no database.
import { describe, expect, it } from "vitest";
import {
  compileCount,
  compileRecordsPage,
  compileRecordsSelect,
  compileGroupsPage,
  compileRelationBatch,
} from "../../src/query/compile.ts";
import { planCount, planList, planRecord } from "../../src/query/plan.ts";
import { parseListParams, parseRecordParams, parseSortParam } from "../../src/query/rest-params.ts";
import type { CompiledQuery } from "../../src/query/types.ts";
import { authorizedDimension, handContext, sampleModel } from "../read/support.ts";

const model = sampleModel();

function params(query: string): Record<string, string | string[]> {
  const out = Object.create(null) as Record<string, string | string[]>;
  for (const [k, v] of new URLSearchParams(query)) {
    const prev = out[k];
    out[k] = prev === undefined ? v : [...(Array.isArray(prev) ? prev : [prev]), v];
  }
  return out;
}

function render(title: string, q: CompiledQuery): string {
  const plan = q.plan ? `-- plan: ${q.plan}\n` : "";
  return `-- ${title}\n-- params: ${JSON.stringify(q.params)}\n${plan}${q.text}\n`;
}

const LIST_CASES: Array<[name: string, dim: string, source: string, query: string]> = [
  ["list-default", "CUST", "anag-1", ""],
  ["list-filter-eq", "CUST", "anag-1", "filter[NAME]=Rossi Srl"],
  ["list-filter-ne-nullable", "CUST", "anag-1", "filter[CITY_ID][$ne]=MI"],
  ["list-filter-ne-not-null", "CUST", "anag-1", "filter[NAME][$ne]=Rossi Srl"],
  [
    "list-filter-ranges",
    "CUST",
    "anag-1",
    "filter[CREDIT_LIMIT][$gt]=1000&filter[CREDIT_LIMIT][$lte]=99999.5&filter[CUST_ID][$gte]=2&filter[CUST_ID][$lt]=10",
  ],
  [
    "list-filter-in-nin",
    "CUST",
    "anag-1",
    "filter[CITY_ID][$in]=MI,RM&filter[CODE][$nin]=C-00001,C-00002&filter[CITY_ID][$nin]=TO",
  ],
  ["list-filter-like-between", "CUST", "anag-1", "filter[NAME][$like]=R%&filter[CUST_ID][$between]=1,3"],
  ["list-filter-boolean", "CUST", "anag-1", "filter[VIP]=true"],
  [
    "list-dollar-filter",
    "CUST",
    "anag-1",
    "$filter=(startwith(NAME,'R') or contains(NAME,'%26')) and not CREDIT_LIMIT lt 100 and CITY_ID ne null",
  ],
  [
    "list-dollar-filter-with-params",
    "CUST",
    "anag-1",
    "filter[VIP]=true&$filter=endwith(NAME,'100%25_done') or EMAIL eq null",
  ],
  ["list-sort-order", "CUST", "anag-1", "sort=-CREDIT_LIMIT,NAME"],
  ["list-order-param", "CUST", "anag-1", "$order=NAME DESC"],
  ["list-paging", "CUST", "anag-1", "$num_rows=10&$offset=20"],
  ["list-keyset", "CUST", "anag-1", "sort=CUST_ID&filter[CUST_ID][$gt]=40&$num_rows=20"],
  ["list-fields-expand", "CUST", "anag-1", "$fields=NAME,CODE&$expand=CITY,ADDR,ORD"],
  ["list-cond-trec", "CUST", "anag-1", "cond_trec=N,C"],
  ["list-explicit-trec", "CUST", "anag-1", "filter[TREC][$in]=C,M"],
  ["list-force-list-cost", "CUST", "anag-1", "forceListCost=INTERNAL,EMAIL"],
  [
    "list-group-aggregate",
    "CUST",
    "anag-1",
    "$group=CITY_ID&aggregate=COUNT,SUM(CREDIT_LIMIT),AVG(CREDIT_LIMIT),MIN(NAME),MAX(CREDIT_LIMIT)&sort=-COUNT",
  ],
  ["list-aggregate-only", "ORD", "sales-1", "aggregate=COUNT,SUM(TOTAL)"],
  ["list-string-id", "LST", "catalog-2", "sort=-DESC_LST"],
];

describe("compiled SQL snapshots", () => {
  it.each(LIST_CASES)("%s", async (name, dimCode, source, query) => {
    const ctx = handContext({ source });
    const dim = authorizedDimension(model, dimCode);
    const plan = planList(ctx, model, dim, parseListParams(params(query)));
    const compiled = plan.kind === "records" ? compileRecordsPage(plan) : compileGroupsPage(plan);
    let text = render(`GET /api/v4/core/${dimCode}?${query}`, compiled);
    if (plan.kind === "records") {
      for (const e of plan.expand) {
        text += `\n${render(`$expand=${e.name} (batch of the page's keys)`, compileRelationBatch(e, "acme", [1, 2]))}`;
      }
    }
    await expect(text).toMatchFileSnapshot(`../fixtures/sql/${name}.sql`);
  });

  it("count", async () => {
    const ctx = handContext();
    const dim = authorizedDimension(model, "CUST");
    const query = "filter[NAME][$like]=R%&$filter=VIP eq true";
    const compiled = compileCount(planCount(ctx, dim, parseListParams(params(query))));
    await expect(render(`GET /api/v4/core/CUST/count?${query}`, compiled)).toMatchFileSnapshot(
      "../fixtures/sql/count.sql",
    );
  });

  it("single record", async () => {
    const ctx = handContext();
    const dim = authorizedDimension(model, "CUST");
    const plan = planRecord(ctx, model, dim, "1", parseRecordParams(params("$expand=CITY")))!;
    await expect(
      render("GET /api/v4/core/CUST/1?$expand=CITY", compileRecordsSelect(plan, false)),
    ).toMatchFileSnapshot("../fixtures/sql/get-record.sql");
  });

  it("named sort", async () => {
    const ctx = handContext({ source: "sales-1" });
    const dim = authorizedDimension(model, "ORD");
    const sort = parseSortParam(dim.sorts.get("latest")!.expr);
    const plan = planList(ctx, model, dim, { ...parseListParams(params("")), sort }, { trustedSort: true });
    if (plan.kind !== "records") throw new Error("records plan expected");
    await expect(render("GET /api/v4/core/ORD/sort/latest", compileRecordsPage(plan))).toMatchFileSnapshot(
      "../fixtures/sql/named-sort.sql",
    );
  });

  it("keeps the SQL text stable across values (one prepared plan per request shape)", () => {
    const ctx = handContext();
    const dim = authorizedDimension(model, "CUST");
    const a = planList(ctx, model, dim, parseListParams(params("filter[NAME]=a&$num_rows=5")));
    const b = planList(
      ctx,
      model,
      dim,
      parseListParams(params("filter[NAME]=b'; DROP TABLE x; --&$num_rows=50")),
    );
    if (a.kind !== "records" || b.kind !== "records") throw new Error("records plans expected");
    const qa = compileRecordsPage(a);
    const qb = compileRecordsPage(b);
    expect(qa.text).toBe(qb.text);
    expect(qb.params).toEqual(["acme", "b'; DROP TABLE x; --", 50, 0]);
  });
});
