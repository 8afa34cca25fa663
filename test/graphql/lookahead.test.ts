// GraphQL enters the query model directly (issue 19): one look-ahead walk of the selection set
// (fragments, aliases, @skip/@include, nested relations) gives what REST gives; a bad argument is
// reported under the GraphQL argument's name; a relation tree is planned once per request,
// whatever the number of parent rows.
import { execute, parse } from "graphql";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GraphQLContext, graphqlResolvers } from "../../src/graphql/resolve.ts";
import { requestBudget } from "../../src/resolvers/write/context.ts";
import { createSchemaCache, type SchemaCache } from "../../src/schema/cache.ts";
import { loginAs, SAMPLE_USERS } from "../helpers/auth.ts";
import { createTestApp, type TestApp } from "../helpers/env.ts";
import { handContext } from "../read/support.ts";
import { type Client, clientFor, NO_RATE_LIMITS } from "../write/http.ts";
import { type GraphQLReply, graphqlClient } from "./helpers.ts";

type Gql = (query: string, variables?: Record<string, unknown>) => Promise<GraphQLReply>;
type Row = Record<string, unknown>;

describe("GraphQL look-ahead and planning", () => {
  let t: TestApp;
  let rest: Client;
  let anna: Gql;
  let schemas: SchemaCache;
  let customers: number[];
  let statements: string[] = [];

  beforeAll(async () => {
    t = await createTestApp("pglite", { fixture: "sample", env: NO_RATE_LIMITS });
    rest = await clientFor(t.app, "anna");
    anna = graphqlClient(t.app, await loginAs(t.app, "anna", SAMPLE_USERS.anna.password));
    const made = await rest.post("/api/v4/core/CUST/batch?source=anag-1", {
      data: Array.from({ length: 40 }, (_, i) => ({ NAME: `Look ${i}`, CITY_ID: i % 2 ? "MI" : "RM" })),
    });
    expect(made.body.success).toBe(40);
    const last = await rest.get("/api/v4/core/CUST?source=anag-1&sort=-CUST_ID&$num_rows=40");
    customers = last.body.data.map((c: { CUST_ID: number }) => c.CUST_ID);
    // Two addresses for each, in two cities: a second level (ADDR → CITY, ADDR → CUST) to load.
    const addresses = await rest.post("/api/v4/core/ADDR/batch?source=anag-2", {
      data: customers.flatMap((id) => [
        { CUST_ID: id, KIND: "BILL", STREET: `Via ${id} A`, CITY_ID: "MI" },
        { CUST_ID: id, KIND: "SHIP", STREET: `Via ${id} B`, CITY_ID: "RM" },
      ]),
    });
    expect(addresses.body.success).toBe(80);
    schemas = createSchemaCache(t.services.metadata, graphqlResolvers());
    const query = t.services.db.query;
    t.services.db.query = ((text: string, ...args: unknown[]) => {
      statements.push(text);
      return (query as (...a: unknown[]) => unknown)(text, ...args);
    }) as typeof query;
  });
  afterAll(async () => {
    schemas?.close();
    await t?.close();
  });

  it("fragments, aliases, @include and a nested relation give what REST gives", async () => {
    const res = await anna(
      `query ($withCity: Boolean!) {
         first: CUST(source: "anag-1", order_by: [{CUST_ID: desc}], limit: 5) {
           data { ...Customer label: NAME ... on CUST { ADDR { ...Address } } }
           meta { ... on PageMeta { total } }
         }
         again: CUST(source: "anag-1", order_by: [{CUST_ID: desc}], limit: 2) { data { CUST_ID town: CITY { NAME } } }
       }
       fragment Customer on CUST { CUST_ID NAME CITY @include(if: $withCity) { NAME } }
       fragment Address on ADDR { ADDR_ID KIND CITY { NAME } }`,
      { withCity: true },
    );
    expect(res.body.errors, JSON.stringify(res.body.errors)).toBeUndefined();
    const page = await rest.get(
      "/api/v4/core/CUST?source=anag-1&sort=-CUST_ID&$num_rows=5&$expand=CITY,ADDR&$count=exact",
    );
    const got = res.body.data.first;
    expect(got.meta.total).toBe(page.body.meta.total);
    expect(got.data.map((c: Row) => c.CUST_ID)).toEqual(page.body.data.map((c: Row) => c.CUST_ID));
    for (const [i, c] of (got.data as Row[]).entries()) {
      const r = page.body.data[i] as Row & { CITY: Row; ADDR: Row[] };
      expect(c.NAME).toBe(r.NAME);
      expect(c.label).toBe(r.NAME);
      expect(c.CITY).toEqual({ NAME: r.CITY.NAME });
      // Each address with its city, as REST gives one address with $expand=CITY.
      const addresses = await rest.get(
        `/api/v4/core/ADDR?source=anag-2&filter[CUST_ID]=${c.CUST_ID}&sort=ADDR_ID&$expand=CITY`,
      );
      expect(c.ADDR).toEqual(
        addresses.body.data.map((a: Row & { CITY: Row }) => ({
          ADDR_ID: a.ADDR_ID,
          KIND: a.KIND,
          CITY: { NAME: a.CITY.NAME },
        })),
      );
    }
    expect(res.body.data.again.data).toEqual(
      (got.data as Row[]).slice(0, 2).map((c) => ({ CUST_ID: c.CUST_ID, town: c.CITY })),
    );

    // @include(if: false) leaves the relation out: not loaded, not in the answer.
    const without = await anna(
      `query ($withCity: Boolean!) { CUST(source: "anag-1", limit: 1) { data { ...Customer } } }
       fragment Customer on CUST { CUST_ID CITY @include(if: $withCity) { NAME } }`,
      { withCity: false },
    );
    expect(without.body.errors).toBeUndefined();
    expect(Object.keys(without.body.data.CUST.data[0])).toEqual(["CUST_ID"]);
  });

  it("a bad limit or offset names the GraphQL argument, at the root and on a relation", async () => {
    const tooMany = await anna(`{ CUST(source: "anag-1", limit: 5000) { data { CUST_ID } } }`);
    expect(tooMany.body.errors[0].extensions).toMatchObject({
      code: "INVALID_PARAMETER",
      status: 400,
      field: "limit",
    });
    expect(tooMany.body.errors[0].message).toMatch(/^limit must be a whole number from 0 to 1000/);
    expect(JSON.stringify(tooMany.body)).not.toContain("$num_rows");

    const negative = await anna(`{ CUST(source: "anag-1", offset: -1) { data { CUST_ID } } }`);
    expect(negative.body.errors[0].extensions).toMatchObject({ code: "INVALID_PARAMETER", field: "offset" });
    expect(JSON.stringify(negative.body)).not.toContain("$offset");

    const nested = await anna(
      `{ CUST(source: "anag-1", limit: 1) { data { CUST_ID ADDR(limit: 1001) { ADDR_ID } } } }`,
    );
    expect(nested.body.errors[0].extensions).toMatchObject({ code: "INVALID_PARAMETER", field: "limit" });
    expect(nested.body.errors[0].path).toEqual(["CUST", "data", 0, "ADDR"]);

    const filter = await anna(`{ CUST(source: "anag-1", filter: "NAME eq") { data { CUST_ID } } }`);
    expect(filter.body.errors[0].extensions).toMatchObject({ code: "INVALID_FILTER", field: "filter" });
    expect(JSON.stringify(filter.body)).not.toContain("$filter");
  });

  /** Runs a query as anna, counting relation plans and data statements. */
  async function run(query: string) {
    let plans = 0;
    const principal = handContext().principal;
    const ctx: GraphQLContext = {
      caller: { principal, requestId: "t", now: () => new Date() },
      services: t.services,
      readContexts: new Map(),
      pageLoaders: new Map(),
      writeBudget: requestBudget(t.services.config),
      onPlan: () => {
        plans++;
      },
    };
    statements = [];
    const result = await execute({ schema: schemas.full(), document: parse(query), contextValue: ctx });
    const tables = [...t.services.metadata.current().dimensions.values()].map((d) => `"${d.tableName}"`);
    return {
      result,
      plans,
      statements: statements.filter((s) => tables.some((table) => s.includes(table))).length,
    };
  }

  it("a two-level relation tree is planned once and loaded in a statement per level, whatever the number of parents", async () => {
    const query = (n: number) =>
      `{ CUST(source: "anag-1", order_by: [{CUST_ID: desc}], limit: ${n}) {
           data { CUST_ID ADDR { ADDR_ID CITY { NAME } CUST { NAME } } } } }`;
    const small = await run(query(2));
    const large = await run(query(40));
    expect(small.result.errors).toBeUndefined();
    expect(large.result.errors).toBeUndefined();
    const data = (large.result.data as { CUST: { data: Array<{ CUST_ID: number; ADDR: Row[] }> } }).CUST.data;
    expect(data).toHaveLength(40);
    for (const c of data) {
      expect(c.ADDR).toHaveLength(2);
      for (const a of c.ADDR) {
        expect((a.CITY as Row).NAME).toBeTypeOf("string");
        expect(a.CUST).toEqual({ NAME: expect.stringMatching(/^Look /) });
      }
    }
    // The second level's two relations, planned once each for 2 parents as for 40 (80 addresses).
    expect(small.plans).toBe(2);
    expect(large.plans).toBe(2);
    // The page, the addresses, and one statement for each second-level relation.
    expect(large.statements).toBe(small.statements);
    expect(large.statements).toBe(4);

    // Under a relation with its own arguments (loaded by its field), the nested relation is still
    // planned once per request.
    const paged = (n: number) =>
      `{ CUST(source: "anag-1", order_by: [{CUST_ID: desc}], limit: ${n}) {
           data { CUST_ID ADDR(order_by: [{ADDR_ID: asc}], limit: 1) { ADDR_ID CITY { NAME } } } } }`;
    const few = await run(paged(2));
    const many = await run(paged(40));
    expect(many.result.errors).toBeUndefined();
    expect(few.plans).toBe(1);
    expect(many.plans).toBe(1);
    expect(many.statements).toBe(few.statements);
  });
});
