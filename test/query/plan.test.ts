// Planning: names checked against the metadata and the caller's field rights, values cast by type,
// limits applied. Pure: the sample metadata as a model.
import { describe, expect, it } from "vitest";
import { authorizeRead } from "../../src/auth/authorize.ts";
import { ApiError } from "../../src/errors.ts";
import { planCount, planList, planRecord } from "../../src/query/plan.ts";
import { parseListParams } from "../../src/query/rest-params.ts";
import { emptyListQuery, type FilterExpr } from "../../src/query/types.ts";
import { authorizedDimension, handContext, sampleModel } from "../read/support.ts";

const model = sampleModel();
const cust = authorizedDimension(model, "CUST");

function params(query: string) {
  const out = Object.create(null) as Record<string, string>;
  for (const [k, v] of new URLSearchParams(query)) out[k] = v;
  return out;
}

/** Plans as `ctx`: the proof the planner reads field rules from is authorized for that caller. */
function plan(query: string, ctx = handContext()) {
  return planList(ctx, model, authorizeRead(ctx, model, "CUST"), parseListParams(params(query)));
}

function failure(fn: () => unknown): ApiError {
  try {
    fn();
  } catch (err) {
    if (err instanceof ApiError) return err;
    throw err;
  }
  throw new Error("expected a failure");
}

const cond = (field: string, value: number): FilterExpr => ({
  kind: "condition",
  field,
  op: "eq",
  value,
  origin: "$filter",
});

describe("planning a list", () => {
  it("returns list fields only (L), the id and expand keys selected besides", () => {
    const p = plan("$fields=NAME&$expand=CITY");
    if (p.kind !== "records") throw new Error("records plan expected");
    expect(p.columns.map((f) => f.code)).toEqual(["NAME"]);
    expect(p.selected.map((f) => f.code)).toEqual(["CUST_ID", "NAME", "CITY_ID"]);
    const all = plan("");
    if (all.kind !== "records") throw new Error("records plan expected");
    expect(all.columns.map((f) => f.code)).toEqual([
      "CUST_ID",
      "CODE",
      "NAME",
      "CITY_ID",
      "CREDIT_LIMIT",
      "VIP",
      "SALES_REP",
      "TREC",
      "CDATA",
      "OWNER",
      "LDATA",
      "LOWNER",
    ]);
  });

  it("silently leaves out requested fields without L; forceListCost adds them back", () => {
    const p = plan("$fields=NAME,EMAIL,INTERNAL");
    if (p.kind !== "records") throw new Error("records plan expected");
    expect(p.columns.map((f) => f.code)).toEqual(["NAME"]);
    const forced = plan("$fields=NAME,EMAIL,INTERNAL&forceListCost=EMAIL,INTERNAL");
    if (forced.kind !== "records") throw new Error("records plan expected");
    expect(forced.columns.map((f) => f.code)).toEqual(["NAME", "EMAIL", "INTERNAL"]);
  });

  it("refuses unknown fields, fields hidden by peso, and filters on fields without R", () => {
    expect(failure(() => plan("filter[NOPE]=1"))).toMatchObject({
      status: 400,
      code: "INVALID_FIELD",
      field: "NOPE",
    });
    expect(failure(() => plan("filter[__proto__]=1"))).toMatchObject({ code: "INVALID_FIELD" });
    expect(failure(() => plan("filter[TENANT_ID]=globex"))).toMatchObject({ code: "INVALID_FIELD" });
    const lucia = handContext({ principal: { peso: 3 } });
    expect(failure(() => plan("filter[CREDIT_LIMIT][$gt]=1", lucia))).toMatchObject({
      code: "INVALID_FIELD",
      field: "CREDIT_LIMIT",
    });
    expect(failure(() => plan("$fields=CREDIT_LIMIT", lucia))).toMatchObject({ code: "INVALID_FIELD" });
    expect(failure(() => plan("sort=CREDIT_LIMIT", lucia))).toMatchObject({ code: "INVALID_FIELD" });
    expect(failure(() => plan("filter[NOTES]=x")).toBody()).toMatchObject({
      code: "FIELD_NOT_SEARCHABLE",
      error: "FieldNotSearchable",
      field: "NOTES",
      status: 400,
    });
    expect(failure(() => plan("filter[INTERNAL]=x"))).toMatchObject({ code: "FIELD_NOT_SEARCHABLE" });
    expect(failure(() => plan("sort=NOTES"))).toMatchObject({ code: "FIELD_NOT_SEARCHABLE" });
    expect(() => plan("filter[RISK_SCORE][$gt]=5&filter[EMAIL][$like]=%25x")).not.toThrow();
  });

  it("narrows to a GraphQL selection's fields, leaving out those the caller may not see (no error)", () => {
    const lucia = handContext({ principal: { peso: 3 } });
    const selectionFields = new Set(["NAME", "CREDIT_LIMIT", "EMAIL"]);
    const list = planList(lucia, model, authorizeRead(lucia, model, "CUST"), {
      ...parseListParams(params("")),
      selectionFields,
    });
    if (list.kind !== "records") throw new Error("records plan expected");
    // CREDIT_LIMIT is hidden from peso 3; EMAIL has no L.
    expect(list.columns.map((f) => f.code)).toEqual(["NAME"]);
    const q = { fields: null, selectionFields, expand: [], condTrec: null, debug: false };
    const record = planRecord(lucia, model, authorizeRead(lucia, model, "CUST"), "7", q);
    expect(record?.columns.map((f) => f.code)).toEqual(["NAME", "EMAIL"]);
    const anna = handContext();
    const full = planRecord(anna, model, authorizeRead(anna, model, "CUST"), "7", q);
    expect(full?.columns.map((f) => f.code)).toEqual(["NAME", "EMAIL", "CREDIT_LIMIT"]);
  });

  it("casts values by the field's type and refuses the ones that do not fit", () => {
    const bad: Array<[string, string]> = [
      ["filter[CUST_ID]=abc", "CUST_ID"],
      ["filter[CUST_ID]=1 OR 1=1", "CUST_ID"],
      ["filter[CUST_ID]=1.5", "CUST_ID"],
      ["filter[CUST_ID]=99999999999999999999", "CUST_ID"],
      ["filter[CREDIT_LIMIT]=12abc", "CREDIT_LIMIT"],
      ["filter[CREDIT_LIMIT]=NaN", "CREDIT_LIMIT"],
      ["$filter=CREDIT_LIMIT gt 'x'", "CREDIT_LIMIT"],
      ["filter[VIP]=maybe", "VIP"],
      ["filter[CDATA][$gt]=2026", "CDATA"],
      ["filter[NAME]=a\u0000b", "NAME"],
      ["$filter=NAME eq true", "NAME"],
      ["$filter=NAME gt null", "NAME"],
      ["filter[NAME][$like]=abc\\", "NAME"],
    ];
    for (const [query, field] of bad) {
      expect(
        failure(() => plan(query)),
        query,
      ).toMatchObject({ status: 400, code: "INVALID_FIELD_VALUE", field });
    }
    expect(failure(() => plan("filter[CUST_ID][$like]=1%25"))).toMatchObject({ code: "INVALID_FILTER" });
    const p = plan(
      "filter[CUST_ID][$in]=1,2&filter[VIP]=TRUE&filter[CREDIT_LIMIT][$between]=1.5,2e3&filter[CDATA][$gte]=20260101000000",
    );
    expect(p.where).toMatchObject({
      kind: "and",
      items: [
        { kind: "live" },
        { op: "in", value: [1, 2] },
        { op: "eq", value: true },
        { op: "between", value: [1.5, 2000] },
        { op: "gte", value: "20260101000000" },
      ],
    });
  });

  it("allows at most 20 conditions and 5 levels of nesting", () => {
    const twenty: FilterExpr = {
      kind: "and",
      items: Array.from({ length: 20 }, (_, i) => cond("CUST_ID", i)),
    };
    const twentyOne: FilterExpr = {
      kind: "and",
      items: Array.from({ length: 21 }, (_, i) => cond("CUST_ID", i)),
    };
    const ctx = handContext();
    expect(() => planCount(ctx, cust, emptyListQuery({ filter: twenty }))).not.toThrow();
    expect(failure(() => planCount(ctx, cust, emptyListQuery({ filter: twentyOne })))).toMatchObject({
      code: "FILTER_TOO_COMPLEX",
      details: { conditions: 21, max_conditions: 20 },
    });
    const nest = (depth: number): FilterExpr => {
      let e: FilterExpr = cond("CUST_ID", 0);
      for (let i = 0; i < depth; i++)
        e =
          i % 2
            ? { kind: "and", items: [cond("CUST_ID", i), e] }
            : { kind: "or", items: [cond("CUST_ID", i), e] };
      return e;
    };
    expect(() => planCount(ctx, cust, emptyListQuery({ filter: nest(5) }))).not.toThrow();
    expect(failure(() => planCount(ctx, cust, emptyListQuery({ filter: nest(6) })))).toMatchObject({
      code: "FILTER_TOO_COMPLEX",
      details: { depth: 6, max_depth: 5 },
    });
    // Same-kind groups are one level.
    const flatAnd = {
      kind: "and",
      items: [{ kind: "and", items: [{ kind: "and", items: [cond("CUST_ID", 1)] }] }],
    } as FilterExpr;
    expect(() => planCount(ctx, cust, emptyListQuery({ filter: flatAnd }))).not.toThrow();
  });

  it("adds TREC <> 'C' unless TREC is filtered or cond_trec is given", () => {
    expect(planCount(handContext(), cust, emptyListQuery()).where).toEqual({ kind: "live" });
    expect(plan("filter[TREC]=C").where).toMatchObject({ kind: "condition", op: "eq", value: "C" });
    expect(plan("$filter=not TREC eq 'N'").where).toMatchObject({ kind: "not" });
    expect(plan("cond_trec=C,N").where).toMatchObject({ kind: "condition", op: "in", value: ["C", "N"] });
  });

  it("checks expansions: known relations only, and read access to the target", () => {
    expect(failure(() => plan("$expand=NOPE"))).toMatchObject({
      code: "INVALID_PARAMETER",
      field: "$expand",
    });
    const lucia = handContext({
      source: "anag-1",
      principal: {
        peso: 3,
        grants: [
          { COD_MENU: "anag-1", NLEFT: 3, NRIGHT: 4, OPERATIONS: ["read"], LEVEL: 1 },
          { COD_MENU: "sales-1", NLEFT: 17, NRIGHT: 18, OPERATIONS: ["read"], LEVEL: 1 },
        ],
      },
    });
    expect(() => plan("$expand=ORD", lucia)).not.toThrow();
    expect(failure(() => plan("$expand=ADDR", lucia))).toMatchObject({
      status: 403,
      code: "INSUFFICIENT_PERMISSIONS",
    });
    expect(failure(() => plan("$expand=CITY", lucia))).toMatchObject({ status: 403 });
  });

  it("plans grouping: fields need R and L, sort only by groups or aggregates", () => {
    expect(failure(() => plan("$group=EMAIL"))).toMatchObject({ code: "FIELD_NOT_READABLE", field: "EMAIL" });
    expect(failure(() => plan("$group=NOTES"))).toMatchObject({ code: "FIELD_NOT_SEARCHABLE" });
    expect(failure(() => plan("$group=CITY_ID&sort=NAME"))).toMatchObject({
      code: "INVALID_PARAMETER",
      field: "sort",
    });
    expect(failure(() => plan("aggregate=SUM(NAME)"))).toMatchObject({
      code: "INVALID_PARAMETER",
      field: "aggregate",
    });
    expect(failure(() => plan("aggregate=MAX(VIP)"))).toMatchObject({ code: "INVALID_PARAMETER" });
    expect(failure(() => plan("$group=CITY_ID&$expand=CITY"))).toMatchObject({ code: "INVALID_PARAMETER" });
    const p = plan("$group=CITY_ID,VIP&aggregate=COUNT&sort=-COUNT");
    if (p.kind !== "groups") throw new Error("groups plan expected");
    expect(p.sort.map((s) => [s.key.kind, s.direction])).toEqual([
      ["aggregate", "desc"],
      ["field", "asc"],
      ["field", "asc"],
    ]);
  });

  it("turns an id that cannot exist into no plan (404), not an error", () => {
    const ctx = handContext();
    const q = { fields: null, expand: [], condTrec: null, debug: false };
    expect(planRecord(ctx, model, cust, "abc", q)).toBeNull();
    expect(planRecord(ctx, model, cust, "1; DROP TABLE x", q)).toBeNull();
    expect(planRecord(ctx, model, cust, "7", q)?.where).toMatchObject({
      kind: "and",
      items: [{ value: 7 }, { kind: "live" }],
    });
  });
});
