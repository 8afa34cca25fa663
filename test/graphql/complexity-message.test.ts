// A refusal over GRAPHQL_MAX_NODES says which lists drove the estimate, what sized each (a page
// size given as a variable counts as the largest page: the limits are checked once per document,
// before any request's variables are known) and what to change. Before, it said only "about
// 102002 values" for a request of 5 rows with `first: $n`.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loginAs, SAMPLE_USERS } from "../helpers/auth.ts";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";
import { NO_RATE_LIMITS } from "../write/http.ts";
import { type GraphQLReply, graphqlClient } from "./helpers.ts";

type Gql = (query: string, variables?: Record<string, unknown>) => Promise<GraphQLReply>;

describe("the message of an operation over the value limit", () => {
  let t: TestApp;
  let anna: Gql;

  beforeAll(async () => {
    t = await createTestApp(BACKENDS[0]!, { fixture: "sample", env: NO_RATE_LIMITS });
    anna = graphqlClient(t.app, await loginAs(t.app, "anna", SAMPLE_USERS.anna.password));
  }, 120_000);
  afterAll(async () => {
    await t?.close();
  });

  const refusal = async (query: string, variables?: Record<string, unknown>) => {
    const res = await anna(query, variables);
    expect(res.status).toBe(200);
    expect(res.body.data).toBeUndefined();
    expect(res.body.errors).toHaveLength(1);
    const error = res.body.errors[0];
    expect(error.extensions).toMatchObject({ code: "QUERY_TOO_COMPLEX", status: 400 });
    return error as { message: string; extensions: { details: Record<string, unknown> } };
  };

  it("a variable page size with a nested list: names the list, the variable's count and both fixes", async () => {
    const error = await refusal(
      `query ($n: Int) { CITY(source: "anag-3", first: $n) { data { CITY_ID CUST { CUST_ID NAME } } } }`,
      { n: 5 },
    );
    expect(error.message).toBe(
      "The operation would resolve about 202002 values (lists counted at their limit); at most 100000 are allowed. " +
        "The largest lists: CITY: 1000 rows (`first: $n`: a page size given as a variable counts as the largest page, 1000, " +
        "whatever value is sent, as the operation is checked once for every value of its variables) × " +
        "CITY.data.CUST: 100 each (no `limit`: a reverse relation reads up to 100 per parent). " +
        "To run it, give CITY.data.CUST a `limit` (`CUST(limit: 10)`), or pass the `first` of CITY literally.",
    );
    expect(error.extensions.details).toEqual({
      nodes: 202002,
      max_nodes: 100_000,
      path: "CITY.data.CUST",
      lists: [
        { path: "CITY", size: 1000, by: "variable", argument: "first", variable: "n" },
        { path: "CITY.data.CUST", size: 100, by: "default" },
      ],
    });
    // Either fix runs: the page size written literally, or the child list bounded.
    const literal = await anna(
      `{ CITY(source: "anag-3", first: 5) { data { CITY_ID CUST { CUST_ID NAME } } } }`,
    );
    expect(literal.body.errors).toBeUndefined();
    const bounded = await anna(
      `query ($n: Int) { CITY(source: "anag-3", first: $n) { data { CITY_ID CUST(limit: 10) { CUST_ID NAME } } } }`,
      { n: 5 },
    );
    expect(bounded.body.errors).toBeUndefined();
  });

  it("aliases and fragments: the path is the response names, through the fragment", async () => {
    const error = await refusal(
      `query ($n: Int) { towns: CITY(source: "anag-3", limit: $n) { data { ...C } } }
       fragment C on CITY { CITY_ID clients: CUST { CUST_ID } }`,
      { n: 5 },
    );
    expect(error.extensions.details).toMatchObject({
      path: "towns.data.clients",
      lists: [
        { path: "towns", size: 1000, by: "variable", argument: "limit", variable: "n" },
        { path: "towns.data.clients", size: 100, by: "default" },
      ],
    });
    expect(error.message).toContain("give towns.data.clients a `limit` (`clients(limit: 10)`)");
    expect(error.message).toContain("or pass the `limit` of towns literally.");
  });

  it("lists sized as written: names each with its argument, and says to lower the largest", async () => {
    const error = await refusal(
      `{ CITY(source: "anag-3", limit: 1000) { data { CITY_ID CUST(limit: 1000) { CUST_ID } } } }`,
    );
    expect(error.message).toContain(
      "The largest lists: CITY: 1000 rows (its `limit`) × CITY.data.CUST: 1000 each (its `limit`). To run it, lower the `limit` of CITY.",
    );
    expect(error.extensions.details).toMatchObject({ path: "CITY.data.CUST" });
    // A list without limit under lists with one: the one to bound.
    const nested = await refusal(
      `{ CITY(source: "anag-3", limit: 1000) { data { CUST(limit: 1) { ADDR { ADDR_ID } } } } }`,
    );
    expect(nested.extensions.details).toMatchObject({
      path: "CITY.data.CUST.ADDR",
      lists: [
        { path: "CITY", size: 1000, by: "argument", argument: "limit" },
        { path: "CITY.data.CUST", size: 1, by: "argument", argument: "limit" },
        { path: "CITY.data.CUST.ADDR", size: 100, by: "default" },
      ],
    });
    expect(nested.message).toContain("To run it, give CITY.data.CUST.ADDR a `limit` (`ADDR(limit: 10)`).");
  });

  it("the heaviest of sibling lists is the one named", async () => {
    const error = await refusal(
      `query ($n: Int) { CITY(source: "anag-3", first: $n) { meta { total } data { CITY_ID few: CUST(limit: 2) { CUST_ID } CUST { CUST_ID NAME } } } }`,
      { n: 1 },
    );
    expect(error.extensions.details).toMatchObject({ path: "CITY.data.CUST" });
  });
});

describe("the message on the demo data (the exploratory report's query)", () => {
  let t: TestApp;
  let olga: Gql;

  beforeAll(async () => {
    t = await createTestApp(BACKENDS[0]!, { fixture: "demo", env: NO_RATE_LIMITS });
    olga = graphqlClient(t.app, await loginAs(t.app, "olga", "olga-demo-1"));
  }, 120_000);
  afterAll(async () => {
    await t?.close();
  });

  it("a page of orders with their lines, the page size a variable: refused with the way out; either way out runs", async () => {
    const paged = (lines: string) =>
      `query ($n: Int) { PO(source: "purchasing-1", first: $n) { data { PO_ID ${lines} { POL_ID ITEM { NAME } } } } }`;
    const refused = await olga(paged("POL"), { n: 5 });
    expect(refused.body.errors[0]).toMatchObject({
      message:
        "The operation would resolve about 302002 values (lists counted at their limit); at most 100000 are allowed. " +
        "The largest lists: PO: 1000 rows (`first: $n`: a page size given as a variable counts as the largest page, 1000, " +
        "whatever value is sent, as the operation is checked once for every value of its variables) × " +
        "PO.data.POL: 100 each (no `limit`: a reverse relation reads up to 100 per parent). " +
        "To run it, give PO.data.POL a `limit` (`POL(limit: 10)`), or pass the `first` of PO literally.",
      extensions: { code: "QUERY_TOO_COMPLEX", status: 400, details: { path: "PO.data.POL" } },
    });
    const bounded = await olga(paged("POL(limit: 10)"), { n: 5 });
    expect(bounded.body.errors).toBeUndefined();
    expect(bounded.body.data.PO.data.length).toBeGreaterThan(0);
    const literal = await olga(paged("POL").replace("first: $n", "first: 5").replace("($n: Int) ", ""));
    expect(literal.body.errors).toBeUndefined();
  });
});
