// A filter value of the wrong kind is named readably in its INVALID_FIELD_VALUE message: an object
// as "an object", a list as "a list" (GraphQL's Int64, Decimal and Date scalars pass any JSON
// through to the filter). Before, String() showed "[object Object]". REST's filter values are query
// string text: they keep their quoted form.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loginAs, SAMPLE_USERS } from "../helpers/auth.ts";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";
import { type Client, client, NO_RATE_LIMITS } from "../write/http.ts";
import { type GraphQLReply, graphqlClient } from "./helpers.ts";

type Gql = (query: string, variables?: Record<string, unknown>) => Promise<GraphQLReply>;

describe("the description of a filter value in its error", () => {
  let t: TestApp;
  let gql: Gql;
  let rest: Client;

  beforeAll(async () => {
    t = await createTestApp(BACKENDS[0]!, { fixture: "sample", env: NO_RATE_LIMITS });
    const token = await loginAs(t.app, SAMPLE_USERS.anna.username, SAMPLE_USERS.anna.password);
    gql = graphqlClient(t.app, token);
    rest = client(t.app, token);
  }, 120_000);
  afterAll(async () => {
    await t?.close();
  });

  const refused = async (query: string, variables: Record<string, unknown>, field: string) => {
    const res = await gql(query, variables);
    expect(res.status).toBe(200);
    expect(res.body.errors).toHaveLength(1);
    const error = res.body.errors[0];
    expect(error.extensions).toMatchObject({ code: "INVALID_FIELD_VALUE", status: 400, field });
    return error.message as string;
  };

  const customers = `query ($w: CUST_where) { CUST(source: "anag-1", where: $w) { data { CUST_ID } } }`;
  const orders = `query ($w: ORD_where) { ORD(source: "sales-1", where: $w) { data { ORD_ID } } }`;

  it("GraphQL: an object or a list where a number, a whole number or a date is expected", async () => {
    expect(await refused(customers, { w: { CREDIT_LIMIT: { _eq: { a: 1 } } } }, "CREDIT_LIMIT")).toBe(
      "CREDIT_LIMIT: expected a number, got an object",
    );
    expect(await refused(customers, { w: { CUST_ID: { _eq: { a: 1 } } } }, "CUST_ID")).toBe(
      "CUST_ID: expected a whole number, got an object",
    );
    expect(await refused(customers, { w: { CUST_ID: { _in: [1, [2, 3]] } } }, "CUST_ID")).toBe(
      "CUST_ID: expected a whole number, got a list",
    );
    expect(await refused(orders, { w: { ORD_DATE: { _gt: { day: 1 } } } }, "ORD_DATE")).toMatch(
      /^ORD_DATE: expected .* got an object$/,
    );
    expect(await refused(orders, { w: { ORD_DATE: { _in: [["20260101"]] } } }, "ORD_DATE")).toMatch(
      /^ORD_DATE: expected .* got a list$/,
    );
  });

  it("GraphQL and REST: a text value keeps its quoted form", async () => {
    expect(await refused(customers, { w: { CREDIT_LIMIT: { _eq: "lots" } } }, "CREDIT_LIMIT")).toBe(
      "CREDIT_LIMIT: expected a number, got 'lots'",
    );
    const res = await rest.get("/api/v4/core/CUST?source=anag-1&filter[CREDIT_LIMIT][$eq]=lots");
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({
      code: "INVALID_FIELD_VALUE",
      field: "CREDIT_LIMIT",
      message: "CREDIT_LIMIT: expected a number, got 'lots'",
    });
  });
});
