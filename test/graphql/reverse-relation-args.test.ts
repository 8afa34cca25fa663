// A reverse relation with arguments of its own (`CITY { CUST(limit: 10) }`) is read with those
// arguments and the root field's scope (source, center_dett), nothing else of the root field: the
// root's where, filter, search, order and cursor paging choose the parents, not their children.
// Before, the root field's arguments were merged in: the children were filtered by the parent's
// `where` (none left, or a field of the parent the child lacks: INVALID_FIELD), and a cursor-paged
// parent (`first`) refused every child `limit` or `offset`. The estimate counts such a child at its
// own limit, 100 without one (what it reads per parent), whatever the field above it.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type EventRuntime, startEventRuntime } from "../../src/events/runtime.ts";
import { eventually } from "../events/support.ts";
import { loginAs, SAMPLE_USERS } from "../helpers/auth.ts";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";
import { client, NO_RATE_LIMITS } from "../write/http.ts";
import { type GraphQLReply, graphqlClient } from "./helpers.ts";

type Gql = (query: string, variables?: Record<string, unknown>) => Promise<GraphQLReply>;

/** Milano's customers in the sample, by id: what CITY MI's CUST list holds, however MI was chosen. */
const MILANO_CUSTOMERS = [
  { CUST_ID: 1, NAME: "Rossi Srl" },
  { CUST_ID: 4, NAME: "Neri Trasporti" },
];

describe.each(BACKENDS)("reverse relations with their own arguments (%s)", (backend) => {
  let t: TestApp;
  let anna: Gql;
  let token: string;
  let runtime: EventRuntime;

  beforeAll(async () => {
    t = await createTestApp(backend, {
      fixture: "sample",
      env: { ...NO_RATE_LIMITS, EVENTS_POLL_MS: "60000" },
    });
    token = await loginAs(t.app, "anna", SAMPLE_USERS.anna.password);
    anna = graphqlClient(t.app, token);
    // The search indexer (the root's `search` below) reads the events.
    runtime = await startEventRuntime(t.services, { relay: true, subscribers: true });
  });
  afterAll(async () => {
    await runtime?.stop();
    await t?.close();
  });

  const milano = async (rootArgs: string, child = "CUST(limit: 10)") => {
    const res = await anna(
      `{ CITY(source: "anag-3", ${rootArgs}) { data { CITY_ID ${child} { CUST_ID NAME } } } }`,
    );
    expect(res.status).toBe(200);
    expect(res.body.errors).toBeUndefined();
    return res.body.data.CITY.data;
  };

  it("the root's where, filter, search and order_by choose the parents, not the children", async () => {
    const expected = [{ CITY_ID: "MI", CUST: MILANO_CUSTOMERS }];
    // The child's list without arguments of its own: the reference.
    expect(await milano(`where: {NAME: {_eq: "Milano"}}`, "CUST")).toEqual(expected);
    expect(await milano(`where: {NAME: {_eq: "Milano"}}`)).toEqual(expected);
    expect(await milano(`filter: "NAME eq 'Milano'"`)).toEqual(expected);
    // The parent sorted by NAME: the children keep their own order (by id), not NAME's.
    expect(await milano(`where: {CITY_ID: {_eq: "MI"}}, order_by: [{NAME: asc}]`)).toEqual(expected);
    expect(await milano(`where: {CITY_ID: {_eq: "MI"}}, sort: "NAME"`)).toEqual(expected);
    // The child's own arguments still apply.
    expect(await milano(`where: {NAME: {_eq: "Milano"}}`, `CUST(where: {NAME: {_like: "Neri%"}})`)).toEqual([
      { CITY_ID: "MI", CUST: [MILANO_CUSTOMERS[1]] },
    ]);
    expect(await milano(`where: {NAME: {_eq: "Milano"}}`, "CUST(order_by: [{NAME: asc}])")).toEqual([
      { CITY_ID: "MI", CUST: [MILANO_CUSTOMERS[1], MILANO_CUSTOMERS[0]] },
    ]);
  });

  it("the root's search chooses the parents, not the children", async () => {
    // A customer the search index finds (the indexer runs on the events), with two addresses
    // whose words are not the customer's.
    const rest = client(t.app, token);
    const created = await rest.post("/api/v4/core/CUST?source=anag-1", {
      data: { NAME: "Quokka Zanzibar Trading", CITY_ID: "MUC" },
    });
    expect(created.status).toBe(201);
    const id = created.body.data.CUST_ID;
    for (const KIND of ["BILL", "SHIP"]) {
      const address = await rest.post("/api/v4/core/ADDR?source=anag-2", {
        data: { CUST_ID: id, KIND, STREET: `Via ${KIND}`, CITY_ID: "MI" },
      });
      expect(address.status).toBe(201);
    }
    const found = async (child: string) => {
      const res = await anna(
        `{ CUST(source: "anag-1", search: "zanzibar") { data { CUST_ID ${child} { KIND STREET } } } }`,
      );
      expect(res.status).toBe(200);
      expect(res.body.errors).toBeUndefined();
      return res.body.data.CUST.data.length ? res.body.data.CUST.data : undefined;
    };
    const expected = [
      {
        CUST_ID: id,
        ADDR: [
          { KIND: "BILL", STREET: "Via BILL" },
          { KIND: "SHIP", STREET: "Via SHIP" },
        ],
      },
    ];
    expect(await eventually(() => found("ADDR"), { what: "the customer indexed" })).toEqual(expected);
    expect(await found("ADDR(limit: 10)")).toEqual(expected);
  });

  it("a root field the child lacks does not make the child's query fail", async () => {
    const res = await anna(
      `{ ORD(source: "sales-1", where: {STATUS: {_is_null: false}}, order_by: [{ORD_DATE: desc}]) { data { ORD_DATE ORDL(limit: 10) { PROD_ID QTY } } } }`,
    );
    expect(res.status).toBe(200);
    expect(res.body.errors).toBeUndefined();
    expect(res.body.data.ORD.data).toEqual([
      { ORD_DATE: "20261110", ORDL: [{ PROD_ID: "P0002", QTY: 100 }] },
      { ORD_DATE: "20261102", ORDL: [{ PROD_ID: "P0001", QTY: 100 }] },
    ]);
  });

  it("a cursor-paged root (first, after) leaves the children their limit and offset", async () => {
    const query = `query ($n: Int, $after: String) {
      CITY(source: "anag-3", first: $n, after: $after, order_by: [{CITY_ID: asc}]) {
        data { CITY_ID CUST(limit: 1, offset: 1) { CUST_ID } }
        meta { end_cursor }
      }
    }`;
    // acme's cities by id: MI (customers 1, 4), MUC (none), RM (2), TO (3).
    const first = await anna(query, { n: 1 });
    expect(first.status).toBe(200);
    expect(first.body.errors).toBeUndefined();
    expect(first.body.data.CITY.data).toEqual([{ CITY_ID: "MI", CUST: [{ CUST_ID: 4 }] }]);
    const next = await anna(query, { n: 3, after: first.body.data.CITY.meta.end_cursor });
    expect(next.body.errors).toBeUndefined();
    expect(next.body.data.CITY.data).toEqual([
      { CITY_ID: "MUC", CUST: [] },
      { CITY_ID: "RM", CUST: [] },
      { CITY_ID: "TO", CUST: [] },
    ]);
    // A child limit of 0 under `after` is the child's own business (a root limit 0 is refused with after).
    const zero = await anna(
      `query ($after: String) { CITY(source: "anag-3", first: 1, after: $after, order_by: [{CITY_ID: asc}]) { data { CITY_ID CUST(limit: 0) { CUST_ID } } } }`,
      { after: first.body.data.CITY.meta.end_cursor },
    );
    expect(zero.body.errors).toBeUndefined();
    expect(zero.body.data.CITY.data).toEqual([{ CITY_ID: "MUC", CUST: [] }]);
  });

  it("the estimate of `first: $n` counts a child at its own limit, 100 without one", async () => {
    const paged = (child: string) =>
      `query ($n: Int, $after: String) { CITY(source: "anag-3", first: $n, after: $after) { data { CITY_ID ${child} { CUST_ID } } } }`;
    // A variable `first` counts as the largest page (1,000 cities), each with 100 customers: over 100,000.
    const refused = await anna(paged("CUST"), { n: 2 });
    // Refused before it runs; answered 200 as application/json (graphql-over-http), the code's status 400.
    expect(refused.status).toBe(200);
    expect(refused.body.data).toBeUndefined();
    expect(refused.body.errors[0].extensions).toMatchObject({
      code: "QUERY_TOO_COMPLEX",
      status: 400,
      details: { nodes: 1 + 1 + 1000 * (1 + 1 + 100 * 1), max_nodes: 100_000 },
    });
    // The child's own limit bounds it: a typed client's cursor page with a child list runs.
    const ok = await anna(paged("CUST(limit: 10)"), { n: 2 });
    expect(ok.status).toBe(200);
    expect(ok.body.errors).toBeUndefined();
    expect(ok.body.data.CITY.data).toHaveLength(2);
    // A child without limit under a child with one reads up to 100 per parent all the same: it is
    // counted so, not at the limit of the list above it (1 here), which let this through before.
    const nested = await anna(
      `{ CITY(source: "anag-3", limit: 1000) { data { CUST(limit: 1) { ADDR { ADDR_ID } } } } }`,
    );
    expect(nested.status).toBe(200);
    expect(nested.body.data).toBeUndefined();
    expect(nested.body.errors[0].extensions).toMatchObject({
      code: "QUERY_TOO_COMPLEX",
      details: { nodes: 1 + 1 + 1000 * (1 + 1 * (1 + 100 * 1)), max_nodes: 100_000 },
    });
  });
});
