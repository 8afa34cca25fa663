// The GraphQL server: batched loading (statements counted), hidden fields as FIELD_NOT_VISIBLE
// errors, depth and cost limits before execution, authentication failures as HTTP 401, and a
// metadata change visible without a restart.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loginAs, SAMPLE_USERS } from "../helpers/auth.ts";
import { createTestApp, type TestApp } from "../helpers/env.ts";
import { type Client, clientFor, NO_RATE_LIMITS } from "../write/http.ts";
import { graphqlResolvers } from "../../src/graphql/resolve.ts";
import { createSchemaCache } from "../../src/schema/cache.ts";
import { eventually } from "../events/support.ts";
import { type GraphQLReply, graphqlClient } from "./helpers.ts";

type Gql = (query: string, variables?: Record<string, unknown>) => Promise<GraphQLReply>;

describe("GraphQL server", () => {
  let t: TestApp;
  let rest: Client;
  let anna: Gql;
  let statements: string[] = [];

  beforeAll(async () => {
    t = await createTestApp("pglite", { fixture: "sample", env: NO_RATE_LIMITS });
    rest = await clientFor(t.app, "anna");
    anna = graphqlClient(t.app, await loginAs(t.app, "anna", SAMPLE_USERS.anna.password));
    const created = await rest.post("/api/v4/core/CUST/batch?source=anag-1", {
      data: Array.from({ length: 100 }, (_, i) => ({ NAME: `Bulk ${i}`, CITY_ID: i % 2 ? "MI" : "RM" })),
    });
    expect(created.body.success).toBe(100);
    const query = t.services.db.query;
    t.services.db.query = ((text: string, ...rest: unknown[]) => {
      statements.push(text);
      return (query as (...a: unknown[]) => unknown)(text, ...rest);
    }) as typeof query;
  });
  afterAll(async () => {
    await t?.close();
  });

  /** Statements that read dimension tables (not the session look-up of authentication). */
  function dataStatements(): string[] {
    const tables = [...t.services.metadata.current().dimensions.values()].map((d) => `"${d.tableName}"`);
    return statements.filter((s) => tables.some((table) => s.includes(table)));
  }

  it("an Int64 past 2^53 - 1 is refused as the client wrote it, in a literal and in a variable", async () => {
    const literal = await anna(
      `{ CUST(source: "anag-1", where: {CUST_ID: {_eq: 9007199254740993}}) { data { CUST_ID } } }`,
    );
    expect(literal.body.errors[0]).toMatchObject({
      message: expect.stringContaining("Int64 cannot represent 9007199254740993"),
      extensions: { code: "GRAPHQL_VALIDATION_FAILED" },
    });
    expect(literal.body.data).toBeUndefined();
    const variable = await anna(
      `query($id: Int64!) { CUST(source: "anag-1", where: {CUST_ID: {_eq: $id}}) { data { CUST_ID } } }`,
      { id: 2 ** 60 },
    );
    expect(variable.body.errors[0].message).toContain("Int64 cannot represent");
    expect(variable.body.errors[0].extensions.code).toBe("BAD_USER_INPUT");
    // The largest safe one is a whole number like any other.
    const safe = await anna(
      `{ CUST(source: "anag-1", where: {CUST_ID: {_eq: 9007199254740991}}) { data { CUST_ID } } }`,
    );
    expect(safe.body.errors).toBeUndefined();
    expect(safe.body.data.CUST.data).toEqual([]);
  });

  it("100 records with two relations cost 2 data statements (the forward one joined); a nested chain one per level", async () => {
    statements = [];
    const res = await anna(
      `{ CUST(source: "anag-1", limit: 100, order_by: [{CUST_ID: desc}]) { data { CUST_ID CITY { NAME } ADDR { KIND } } } }`,
    );
    expect(res.body.errors).toBeUndefined();
    expect(res.body.data.CUST.data).toHaveLength(100);
    expect(res.body.data.CUST.data[0].CITY.NAME).toBeTypeOf("string");
    // The page with each customer's city joined in (a forward relation), and one for the addresses.
    expect(dataStatements()).toHaveLength(2);

    statements = [];
    const nested = await anna(`{ ADDR(source: "anag-2") { data { ADDR_ID CUST { NAME CITY { NAME } } } } }`);
    expect(nested.body.errors).toBeUndefined();
    expect(nested.body.data.ADDR.data[0].CUST.CITY.NAME).toBeTypeOf("string");
    // The addresses with their customers joined in, then one statement for the customers' cities.
    expect(dataStatements()).toHaveLength(2);
  });

  it("a list and its relations read only the fields their selections ask for, and the keys of the relations under them", async () => {
    statements = [];
    const res = await anna(
      `{ ADDR(source: "anag-2", limit: 5, order_by: [{ADDR_ID: asc}]) { data { ADDR_ID CUST { NAME ... on CUST { CITY { NAME } } } } } }`,
    );
    expect(res.body.errors).toBeUndefined();
    const rows = res.body.data.ADDR.data as Array<{ CUST: { NAME: string; CITY: { NAME: string } } }>;
    expect(rows.length).toBeGreaterThan(0);
    for (const row of rows) {
      expect(Object.keys(row.CUST)).toEqual(["NAME", "CITY"]);
      expect(row.CUST.CITY.NAME).toBeTypeOf("string");
    }
    const [page, cities] = dataStatements();
    // The customer joined into the page: its NAME, the key of CITY (selected under it through an
    // inline fragment), the key it is matched by and its id; not its other fields.
    const joined = /LEFT JOIN LATERAL \(SELECT (.*?) FROM "TB_ANAG_CUST00"/.exec(page!)?.[1];
    expect(joined?.match(/t\."(\w+)"/g)).toEqual(['t."CUST_ID"', 't."NAME"', 't."CITY_ID"']);
    // The cities, one statement for the level: their NAME and the key they are matched by.
    expect(/^SELECT (.*?)\s+FROM "TB_ANAG_CITY00"/.exec(cities!)?.[1]).toBe('t."CITY_ID", t."NAME"');
    // The addresses themselves: the id selected and the key of CUST, nothing else.
    expect(page).toContain('SELECT t."ADDR_ID", t."CUST_ID"\nFROM "TB_ANAG_ADDR00" AS t');

    // REST's $expand returns every field the caller may list, as before.
    const restPage = await rest.get("/api/v4/core/ADDR?source=anag-2&$num_rows=1&sort=ADDR_ID&$expand=CUST");
    expect(Object.keys(restPage.body.data[0].CUST)).toEqual(
      expect.arrayContaining(["CUST_ID", "CODE", "NAME", "CITY_ID", "CREDIT_LIMIT"]),
    );
  });

  it("a reverse relation with its own where, order and limit: one statement for every parent, each page right", async () => {
    // Two addresses for each of the last 20 customers, so that each page has something to cut.
    const last = await rest.get("/api/v4/core/CUST?source=anag-1&sort=-CUST_ID&$num_rows=20");
    const ids: number[] = last.body.data.map((c: { CUST_ID: number }) => c.CUST_ID);
    const made = await rest.post("/api/v4/core/ADDR/batch?source=anag-2", {
      data: ids.flatMap((id) => [
        { CUST_ID: id, KIND: "BILL", STREET: `Via ${id} A`, CITY_ID: "MI" },
        { CUST_ID: id, KIND: "SHIP", STREET: `Via ${id} B`, CITY_ID: "RM" },
      ]),
    });
    expect(made.body.success).toBe(40);
    statements = [];
    const res = await anna(
      `{ CUST(source: "anag-1", limit: 100, order_by: [{CUST_ID: desc}]) {
           data { CUST_ID ADDR(where: {KIND: {_eq: "SHIP"}}, order_by: [{ADDR_ID: desc}], limit: 1) { ADDR_ID STREET } } } }`,
    );
    expect(res.body.errors, JSON.stringify(res.body.errors)).toBeUndefined();
    // The page of customers, and one statement for the addresses of all 100.
    expect(dataStatements(), dataStatements().join("\n----\n")).toHaveLength(2);
    for (const c of res.body.data.CUST.data.slice(0, 25)) {
      const one = await rest.get(
        `/api/v4/core/ADDR?source=anag-2&filter[CUST_ID]=${c.CUST_ID}&filter[KIND]=SHIP&sort=-ADDR_ID&$num_rows=1`,
      );
      expect(c.ADDR, String(c.CUST_ID)).toEqual(
        one.body.data.map((a: { ADDR_ID: number; STREET: string }) => ({
          ADDR_ID: a.ADDR_ID,
          STREET: a.STREET,
        })),
      );
    }
    expect(
      res.body.data.CUST.data.filter((c: { ADDR: unknown[] }) => c.ADDR.length === 1).length,
    ).toBeGreaterThanOrEqual(20);
  });

  // A field peso hides is not in the caller's schema at all (test/graphql/schema-profiles.test.ts).
  it("order_by takes one field per object: two in one are refused (GraphQL keeps no order between them)", async () => {
    const two = await anna(
      `{ CUST(source: "anag-1", limit: 3, order_by: [{CREDIT_LIMIT: asc, NAME: desc}]) { data { CUST_ID } } }`,
    );
    expect(two.body.data?.CUST ?? null).toBeNull();
    expect(two.body.errors[0].extensions).toMatchObject({ code: "INVALID_PARAMETER", field: "order_by" });
    expect(two.body.errors[0].message).toMatch(
      /one field per object.*(CREDIT_LIMIT and NAME|NAME and CREDIT_LIMIT)/,
    );
    const split = await anna(
      `{ CUST(source: "anag-1", limit: 3, order_by: [{CREDIT_LIMIT: asc}, {NAME: desc}]) { data { CUST_ID } } }`,
    );
    expect(split.body.errors).toBeUndefined();
    expect(split.body.data.CUST.data).toHaveLength(3);
  });

  it("a field the caller may not read is null with FIELD_NOT_VISIBLE at its path: no L, no D", async () => {
    const noL = await anna(
      `{ CUST(source: "anag-1", limit: 1, order_by: [{CUST_ID: asc}]) { data { EMAIL } } }`,
    );
    expect(noL.body.data.CUST.data[0].EMAIL).toBeNull();
    expect(noL.body.errors[0].extensions.code).toBe("FIELD_NOT_VISIBLE");
    const detail = await anna(`{ CUST_by_id(source: "anag-1", id: "1") { EMAIL RISK_SCORE } }`);
    expect(detail.body.data.CUST_by_id).toEqual({ EMAIL: "info@rossi.example", RISK_SCORE: null });
    expect(detail.body.errors).toHaveLength(1);
    expect(detail.body.errors[0]).toMatchObject({
      path: ["CUST_by_id", "RISK_SCORE"],
      extensions: { code: "FIELD_NOT_VISIBLE" },
    });
  });

  it("too deep or too wide operations are refused with QUERY_TOO_COMPLEX before they run", async () => {
    statements = [];
    const deep = await anna(
      `{ ADDR(source: "anag-2") { data { CUST { ADDR { CUST { ADDR { CUST { ADDR { CUST { ADDR { ADDR_ID } } } } } } } } } } }`,
    );
    expect(deep.body.errors[0].extensions).toMatchObject({
      code: "QUERY_TOO_COMPLEX",
      details: { depth: 11, max_depth: 10 },
    });
    const aliases = Array.from({ length: 1001 }, (_, i) => `a${i}: CUST_count(source: "anag-1")`).join(" ");
    const wide = await anna(`{ ${aliases} }`);
    expect(wide.body.errors[0].extensions).toMatchObject({
      code: "QUERY_TOO_COMPLEX",
      details: { cost: 1001, max_cost: 1000 },
    });
    expect(dataStatements()).toEqual([]);
  });

  it("no token and a bad token are HTTP 401 with extensions.code", async () => {
    const none = await graphqlClient(t.app, null)(`{ CUST_count(source: "anag-1") }`);
    expect(none.status).toBe(401);
    expect(none.body.errors[0].extensions).toEqual({ code: "TOKEN_MISSING", status: 401 });
    const bad = await graphqlClient(
      t.app,
      "not-a-token",
      "/api/v4/graphql",
    )(`{ CUST_count(source: "anag-1") }`);
    expect(bad.status).toBe(401);
    expect(bad.body.errors[0].extensions.code).toBe("TOKEN_INVALID");
  });

  it("a new field is queryable right after the metadata write, without a restart", async () => {
    const before = await anna(`{ CUST(source: "anag-1", limit: 1) { data { NICKNAME } } }`);
    expect(before.body.errors[0].message).toContain("NICKNAME");
    const added = await rest.post("/api/v4/core/VAR?source=erp", {
      data: { COD_DIM: "CUST", NUM_VAR: 40, COD_VAR: "NICKNAME", DATA_TYPE: "STRING", LENGTH: 20 },
    });
    expect(added.status).toBe(201);
    const set = await anna(
      `mutation { CUST_patch(source: "anag-1", id: "1", data: {NICKNAME: "Ross"}) { data { NICKNAME } } }`,
    );
    expect(set.body.errors).toBeUndefined();
    const after = await anna(`{ CUST_by_id(source: "anag-1", id: "1") { NICKNAME } }`);
    expect(after.body.data.CUST_by_id.NICKNAME).toBe("Ross");
  });

  it("a metadata change builds the new schema in the background, before any request asks", async () => {
    const cache = createSchemaCache(t.services.metadata, graphqlResolvers());
    try {
      cache.full();
      const before = cache.version();
      expect(before).toBe(t.services.metadata.current().version);
      const changed = await rest.patch("/api/v4/core/DIM/CUST?source=erp", {
        data: { DESC_DIM: "Customers (renamed)" },
      });
      expect(changed.status).toBe(200);
      // No request calls cache.current() here: the change itself leads to the build.
      await eventually(() => cache.version() === t.services.metadata.current().version, {
        what: "the background build",
      });
      expect(cache.version()).toBeGreaterThan(before!);
    } finally {
      cache.close();
    }
  });
});
