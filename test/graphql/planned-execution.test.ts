// Queries over a plan made once per document (src/graphql/planned-execution.ts) answer byte for
// byte as graphql-js's interpreter does: the same documents are sent to a service that plans and
// to one that does not (GRAPHQL_PLANNED_EXECUTION=false), on the same data, and the answers
// (status, content type, body) compared. The metric of how each operation ran shows which path
// answered: a plan, the interpreter (outside the plan's subset), or the interpreter after a planned
// run met an error.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, loginAs, SAMPLE_USERS } from "../helpers/auth.ts";
import { createTestApp, type TestApp } from "../helpers/env.ts";
import { NO_RATE_LIMITS } from "../write/http.ts";

type By = "plan" | "interpreter" | "plan_then_interpreter";

// Not CDATA: the two services loaded the fixture a moment apart.
const CUST_FIELDS = "CUST_ID CODE NAME CITY_ID CREDIT_LIMIT TREC OWNER LDATA LOWNER";

describe("planned execution", () => {
  let planned: TestApp;
  let interpreted: TestApp;
  const tokens: Record<string, Record<string, string>> = { planned: {}, interpreted: {} };

  beforeAll(async () => {
    [planned, interpreted] = await Promise.all([
      createTestApp("pglite", { fixture: "sample", env: NO_RATE_LIMITS }),
      createTestApp("pglite", {
        fixture: "sample",
        env: { ...NO_RATE_LIMITS, GRAPHQL_PLANNED_EXECUTION: "false" },
      }),
    ]);
    for (const user of ["anna", "lucia"] as const) {
      tokens.planned![user] = await loginAs(planned.app, user, SAMPLE_USERS[user].password);
      tokens.interpreted![user] = await loginAs(interpreted.app, user, SAMPLE_USERS[user].password);
    }
  });
  afterAll(async () => {
    await Promise.all([planned?.close(), interpreted?.close()]);
  });

  async function executions(t: TestApp): Promise<Record<By, number>> {
    const metric = await t.services.metrics.graphqlExecutions.get();
    const out: Record<By, number> = { plan: 0, interpreter: 0, plan_then_interpreter: 0 };
    for (const v of metric.values) out[v.labels.by as By] += v.value;
    return out;
  }

  async function send(t: TestApp, token: string, body: Record<string, unknown>) {
    const res = await t.app.inject({
      method: "POST",
      url: "/graphql",
      headers: { ...bearer(token), "content-type": "application/json", accept: "application/json" },
      payload: body,
    });
    return { status: res.statusCode, type: res.headers["content-type"], body: res.body };
  }

  it.each<[string, "anna" | "lucia", Record<string, unknown>, By]>([
    [
      "a page of rows",
      "anna",
      { query: `{ CUST(source: "anag-1", limit: 5) { data { ${CUST_FIELDS} } } }` },
      "plan",
    ],
    [
      "filter, order, meta with total and cursor",
      "anna",
      {
        query: `{ CUST(source: "anag-1", where: {CITY_ID: {_eq: "MI"}}, order_by: [{NAME: asc}], limit: 2) { data { CUST_ID NAME } meta { total has_more num_rows offset end_cursor } } }`,
      },
      "plan",
    ],
    [
      "relations both ways, aliases, __typename",
      "anna",
      {
        query: `{ __typename list: CUST(source: "anag-1", limit: 3, order_by: [{CUST_ID: asc}]) { __typename data { id: CUST_ID CITY { __typename NAME COUNTRY } ADDR { STREET KIND } first: ADDR(limit: 1, order_by: [{ADDR_ID: desc}]) { ADDR_ID } } } }`,
      },
      "plan",
    ],
    [
      "fragments, inline fragments and one field asked twice",
      "anna",
      {
        query: `query Q { CUST(source: "anag-1", limit: 2, order_by: [{CUST_ID: asc}]) { data { ...Names ... on CUST { CODE NAME } CITY { ...City } } } } fragment Names on CUST { NAME CUST_ID } fragment City on CITY { NAME }`,
        operationName: "Q",
      },
      "plan",
    ],
    [
      "variables, by id, count and aggregate",
      "anna",
      {
        query: `query ($id: ID!, $city: String!) { one: CUST_by_id(source: "anag-1", id: $id) { NAME CITY { NAME } } n: CUST_count(source: "anag-1", where: {CITY_ID: {_eq: $city}}) agg: CUST_aggregate(source: "anag-1", group_by: ["CITY_ID"], aggregate: [{fn: COUNT}]) { data meta { has_more } } }`,
        variables: { id: "1", city: "MI" },
      },
      "plan",
    ],
    [
      "a missing record (null)",
      "anna",
      { query: `{ CUST_by_id(source: "anag-1", id: "999999") { CUST_ID } }` },
      "plan",
    ],
    [
      // EMAIL has no L flag: in the schema, not readable in a list (a field peso hides is not in
      // the caller's schema at all).
      "a field the caller may not read (a field error, partial data)",
      "lucia",
      {
        query: `{ CUST(source: "anag-1", limit: 2, order_by: [{CUST_ID: asc}]) { data { NAME EMAIL } } }`,
      },
      "plan_then_interpreter",
    ],
    [
      "a resolver's service error",
      "anna",
      { query: `{ CUST(source: "no-such-source") { data { CUST_ID } } }` },
      "plan_then_interpreter",
    ],
    [
      "a variable that does not coerce",
      "anna",
      {
        query: `query ($id: ID!) { CUST_by_id(source: "anag-1", id: $id) { NAME } }`,
        variables: { id: { x: 1 } },
      },
      "interpreter",
    ],
    [
      "@include and @skip",
      "anna",
      {
        query: `query ($all: Boolean!) { CUST(source: "anag-1", limit: 2, order_by: [{CUST_ID: asc}]) { data { NAME CODE @include(if: $all) CITY_ID @skip(if: $all) } } }`,
        variables: { all: false },
      },
      "interpreter",
    ],
    ["introspection", "anna", { query: `{ __type(name: "CUST") { name fields { name } } }` }, "interpreter"],
    [
      "a mutation refused by the write pipeline (its error replayed, not run again)",
      "anna",
      {
        query: `mutation { CUST_create(source: "anag-1", data: {NAME: "", CREDIT_LIMIT: -1}) { data { CUST_ID } } }`,
      },
      "plan_then_interpreter",
    ],
    [
      "a create with its record and a relation",
      "anna",
      {
        query: `mutation { CUST_create(source: "anag-1", data: {CODE: "PLAN-1", NAME: "Planned", CITY_ID: "MI"}) { __typename message data { CUST_ID CODE NAME CITY_ID CITY { NAME } } } }`,
      },
      "plan",
    ],
    [
      "two creates by alias, one from a variable",
      "anna",
      {
        query: `mutation ($d: CUST_create_input!) { made: CUST_create(source: "anag-1", data: $d) { data { CUST_ID NAME } } also: CUST_create(source: "anag-1", data: {CODE: "PLAN-2B", NAME: "Literal"}) { message data { CODE } } }`,
        variables: { d: { CODE: "PLAN-2", NAME: "From a variable" } },
      },
      "plan",
    ],
    [
      "a second create refused after the first committed (committed named, the third not run)",
      "anna",
      {
        query: `mutation { a: CUST_create(source: "anag-1", data: {CODE: "PLAN-3", NAME: "First"}) { data { CODE } } b: CUST_create(source: "anag-1", data: {CODE: "PLAN-4", NAME: ""}) { data { CODE } } c: CUST_create(source: "anag-1", data: {CODE: "PLAN-5", NAME: "Third"}) { data { CODE } } }`,
      },
      "plan_then_interpreter",
    ],
  ])("%s: the same answer both ways", async (_name, user, body, by) => {
    const before = await executions(planned);
    const a = await send(planned, tokens.planned![user]!, body);
    const b = await send(interpreted, tokens.interpreted![user]!, body);
    expect(a).toEqual(b);
    const after = await executions(planned);
    expect(after[by] - before[by]).toBe(1);
    // Asked again: the kept plan answers the same (a mutation is not sent twice: it writes).
    if (!String(body.query).startsWith("mutation"))
      expect(await send(planned, tokens.planned![user]!, body)).toEqual(b);
  });

  it("writes a planned mutation's records once, and none after a root field that failed", async () => {
    const codes = `{ CUST(source: "anag-1", where: {CODE: {_like: "PLAN-%"}}, order_by: [{CODE: asc}]) { data { CODE NAME } } }`;
    const a = await send(planned, tokens.planned!.anna!, { query: codes });
    expect(a).toEqual(await send(interpreted, tokens.interpreted!.anna!, { query: codes }));
    expect(JSON.parse(a.body).data.CUST.data).toEqual([
      { CODE: "PLAN-1", NAME: "Planned" },
      { CODE: "PLAN-2", NAME: "From a variable" },
      { CODE: "PLAN-2B", NAME: "Literal" },
      { CODE: "PLAN-3", NAME: "First" },
    ]);
  });

  it("answers a long page with relations as the interpreter does, and runs it by plan", async () => {
    const body = {
      query: `{ ORD(source: "sales-1", order_by: [{ORD_ID: desc}], limit: 50) { data { ORD_ID ORD_NO ORD_DATE STATUS TOTAL CUST { CUST_ID NAME CITY { NAME } } ORDL { PROD_ID QTY } } meta { has_more } } }`,
    };
    const before = await executions(planned);
    const a = await send(planned, tokens.planned!.anna!, body);
    expect(a).toEqual(await send(interpreted, tokens.interpreted!.anna!, body));
    expect(JSON.parse(a.body).data.ORD.data.length).toBeGreaterThan(0);
    expect((await executions(planned)).plan - before.plan).toBe(1);
  });

  it("is off with GRAPHQL_PLANNED_EXECUTION=false", async () => {
    const before = await executions(interpreted);
    await send(interpreted, tokens.interpreted!.anna!, {
      query: `{ CUST(source: "anag-1", limit: 1) { data { NAME } } }`,
    });
    const after = await executions(interpreted);
    expect(after.interpreter - before.interpreter).toBe(1);
    expect(after.plan).toBe(0);
  });
});
