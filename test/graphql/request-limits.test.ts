// The limits of a GraphQL request hold for what the request actually sends (docs/graphql-limits.md):
// a variable's default does not size the estimate (the value sent may be any page up to the
// largest), aggregates and lookups count the rows they answer, JSON parameters nest at most 64
// levels over every transport (POST, GET, WebSocket) with the same 400 INVALID_JSON, a GET's
// parameters that are not JSON are a 400, and a body that is not a GraphQL request is one 400.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { eventually } from "../events/support.ts";
import { bearer, loginAs, SAMPLE_USERS } from "../helpers/auth.ts";
import { createTestApp, type TestApp } from "../helpers/env.ts";
import { heavyGauge } from "../robustness/support.ts";
import { NO_RATE_LIMITS } from "../write/http.ts";
import { type GraphQLReply, graphqlClient } from "./helpers.ts";
import { type GraphQLSocket, graphqlSocket, webSocketUrl } from "./ws.ts";

type Gql = (query: string, variables?: Record<string, unknown>) => Promise<GraphQLReply>;

/** A JSON value nesting `levels` arrays ([[1]] is 2). */
function nestedText(levels: number): string {
  return `${"[".repeat(levels)}1${"]".repeat(levels)}`;
}
function nested(levels: number): unknown {
  let v: unknown = 1;
  for (let i = 0; i < levels; i++) v = [v];
  return v;
}

const aliased = (n: number, field: string) =>
  Array.from({ length: n }, (_, i) => `a${i}: ${field}`).join(" ");

describe("GraphQL limits hold for the request as sent", () => {
  let t: TestApp;
  let token: string;
  let anna: Gql;
  let socket: GraphQLSocket;
  let statements: string[] = [];
  /** While set, statements on the customers' table wait for it. */
  let hold: Promise<void> | null = null;

  beforeAll(async () => {
    t = await createTestApp("pglite", { fixture: "sample", env: { ...NO_RATE_LIMITS } });
    token = await loginAs(t.app, "anna", SAMPLE_USERS.anna.password);
    anna = graphqlClient(t.app, token);
    const query = t.services.db.query;
    t.services.db.query = (async (text: string, ...rest: unknown[]) => {
      statements.push(text);
      if (hold && text.includes(`"TB_ANAG_CUST00"`)) await hold;
      return (query as (...a: unknown[]) => Promise<unknown>)(text, ...rest);
    }) as typeof query;
    socket = graphqlSocket(await webSocketUrl(t.app), token);
  });
  afterAll(async () => {
    await socket?.dispose();
    await t?.close();
  });

  const dataStatements = () => statements.filter((s) => /"TB_ANAG_(CUST|ADDR|CITY)00"/.test(s));

  const get = (params: Record<string, string>) =>
    t.app.inject({
      method: "GET",
      url: `/graphql?${new URLSearchParams(params)}`,
      headers: { ...bearer(token), accept: "application/json" },
    });
  const post = (payload: string) =>
    t.app.inject({
      method: "POST",
      url: "/graphql",
      headers: { ...bearer(token), "content-type": "application/json", accept: "application/json" },
      payload,
    });

  describe("a variable limit counts at the largest page, whatever its default", () => {
    const query = (declared: string) =>
      `query ($l: Int${declared}) { ${aliased(20, 'CUST(source: "anag-1", limit: $l) { data { CUST_ID NAME ADDR(limit: $l) { ADDR_ID CITY { NAME } } } }')} }`;
    // Each alias: the list and its page's data, 1,000 customers of 2 fields and 1,000 addresses of 3 values.
    const nodes = 20 * (2 + 1000 * (2 + 1 + 1000 * 3));

    it.each([
      ["a default of 1, 1,000 sent", " = 1", { l: 1000 }],
      ["a default of 1, nothing sent", " = 1", {}],
      ["a default of 1,000", " = 1000", {}],
      ["no default, 1 sent", "", { l: 1 }],
    ])("%s: refused before anything runs", async (_name, declared, variables) => {
      statements = [];
      const res = await anna(query(declared), variables);
      expect(res.body.errors[0].extensions).toMatchObject({
        code: "QUERY_TOO_COMPLEX",
        details: { nodes, max_nodes: 100_000 },
      });
      expect(res.body.data).toBeUndefined();
      expect(dataStatements()).toEqual([]);
    });

    it("the same over WebSocket", async () => {
      const answer = await socket.run({ query: query(" = 1"), variables: { l: 1000 } });
      expect(answer.errors).toEqual([
        expect.objectContaining({ extensions: expect.objectContaining({ code: "QUERY_TOO_COMPLEX" }) }),
      ]);
    });

    /**
     * Sends `page` with `variables` while the customers' statements wait; once `reached` holds,
     * `during` runs, then the statement goes on and the page must answer with its rows.
     */
    async function whileHeld(
      page: string,
      variables: Record<string, unknown>,
      reached: { what: string; holds: () => Promise<boolean> },
      during: () => Promise<void> = async () => {},
    ): Promise<void> {
      let release: () => void = () => {};
      hold = new Promise<void>((resolve) => {
        release = resolve;
      });
      statements = [];
      try {
        const answer = anna(page, variables);
        await eventually(reached.holds, { what: reached.what });
        await during();
        release();
        const res = await answer;
        expect(res.body.errors).toBeUndefined();
        expect(res.body.data.CUST.data.length).toBeGreaterThan(0);
      } finally {
        hold = null;
        release();
      }
    }

    it("a list whose limit is a variable with a small default takes its tenant's heavy lane", async () => {
      // 1,000 customers × 6 fields: at least HEAVY_REQUEST_VALUES (5,000), under GRAPHQL_MAX_NODES.
      const page = `query ($l: Int = 1) { CUST(source: "anag-1", limit: $l) { data { CUST_ID CODE NAME CITY_ID VIP CREDIT_LIMIT } } }`;
      await whileHeld(
        page,
        { l: 1000 },
        {
          what: "the request in its tenant's lane",
          holds: async () => (await heavyGauge(t, "running")) === 1,
        },
      );
      expect(await heavyGauge(t, "running")).toBe(0);
    });

    it("the same list sent a small page (or left at a small default) is no heavy request: it runs outside the lane", async () => {
      const page = `query ($l: Int = 20) { CUST(source: "anag-1", limit: $l) { data { CUST_ID CODE NAME CITY_ID VIP CREDIT_LIMIT } } }`;
      for (const variables of [{ l: 20 }, {}]) {
        // Its statement is reached (and held there) without a turn in the lane.
        await whileHeld(
          page,
          variables,
          { what: "the page's statement", holds: async () => dataStatements().length > 0 },
          async () => expect(await heavyGauge(t, "running")).toBe(0),
        );
      }
    });
  });

  describe("aggregates and lookups count the rows they answer", () => {
    const GROUPS = [
      "CUST_ID",
      "CODE",
      "NAME",
      "CITY_ID",
      "EMAIL",
      "CREDIT_LIMIT",
      "VIP",
      "NOTES",
      "RISK_SCORE",
      "SALES_REP",
      "INTERNAL",
    ];

    it("rows × (group fields + aggregates), at the limit", async () => {
      statements = [];
      const groups = JSON.stringify(GROUPS);
      const bomb = await anna(
        `{ ${aliased(100, `CUST_aggregate(source: "anag-1", group_by: ${groups}, aggregate: [{fn: COUNT}], limit: 1000) { data }`)} }`,
      );
      // The page (1), its data (1), the groups.
      expect(bomb.body.errors[0].extensions).toMatchObject({
        code: "QUERY_TOO_COMPLEX",
        details: { nodes: 100 * (2 + 1000 * (11 + 1)), max_nodes: 100_000 },
      });
      // Without a limit: 100 groups.
      const unlimited = await anna(
        `{ ${aliased(100, `CUST_aggregate(source: "anag-1", group_by: ${groups}, aggregate: [{fn: COUNT}, {fn: MAX, field: "NAME"}]) { data }`)} }`,
      );
      expect(unlimited.body.errors[0].extensions).toMatchObject({
        code: "QUERY_TOO_COMPLEX",
        details: { nodes: 100 * (2 + 100 * (11 + 2)) },
      });
      expect(dataStatements()).toEqual([]);
      // A group_by given by a variable counts as every field the dimension has.
      const byVariable = await anna(
        `query ($g: [String!]!) { ${aliased(10, 'CUST_aggregate(source: "anag-1", group_by: $g, aggregate: [{fn: COUNT}], limit: 1000) { data }')} }`,
        { g: ["CITY_ID"] },
      );
      expect(byVariable.body.errors[0].extensions.code).toBe("QUERY_TOO_COMPLEX");
      expect(dataStatements()).toEqual([]);
      // A small grouping runs.
      const small = await anna(
        `{ ${aliased(10, 'CUST_aggregate(source: "anag-1", group_by: ["CITY_ID"], aggregate: [{fn: COUNT}], limit: 1000) { data }')} }`,
      );
      expect(small.body.errors).toBeUndefined();
      expect(small.body.data.a0.data.length).toBeGreaterThan(0);
    });

    it("vars: up to 1,000 values of a key and a display field each", async () => {
      statements = [];
      const bomb = await anna(
        `{ ${aliased(60, 'vars(source: "anag-1", field: "CITY_ID", full_list: true)')} }`,
      );
      expect(bomb.body.errors[0].extensions).toMatchObject({
        code: "QUERY_TOO_COMPLEX",
        details: { nodes: 60 * (1 + 1000 * 2) },
      });
      expect(dataStatements()).toEqual([]);
      const few = await anna(
        `{ ${aliased(10, 'vars(source: "anag-1", field: "CITY_ID", full_list: true)')} }`,
      );
      expect(few.body.errors).toBeUndefined();
      expect(few.body.data.a0.length).toBeGreaterThan(0);
    });
  });

  describe("JSON parameters nest at most 64 levels on every transport", () => {
    // The request's parameters ({query, variables, …}) are the JSON bounded: the variables one level under.
    const DOCUMENT = `query ($p: JSON) { document(source: "anag-1", name: "none", key: "1", params: $p) }`;
    const refusedAsTooDeep = (body: unknown) =>
      expect(body).toMatchObject({ errors: [{ extensions: { code: "INVALID_JSON", status: 400 } }] });

    it("POST (the body) and GET (its parameters): the same bound, the same error", async () => {
      for (const levels of [63, 64]) {
        const variables = `{"p":${nestedText(levels - 1)}}`;
        const viaPost = await post(`{"query":${JSON.stringify(DOCUMENT)},"variables":${variables}}`);
        const viaGet = await get({ query: DOCUMENT, variables });
        if (levels === 63) {
          for (const res of [viaPost, viaGet]) expect(res.body).not.toContain("INVALID_JSON");
        } else {
          for (const res of [viaPost, viaGet]) {
            expect(res.statusCode).toBe(400);
            refusedAsTooDeep(res.json());
          }
        }
      }
    });

    it("GET: 7,000 levels are a 400, not a stack overflow", async () => {
      const res = await get({ query: DOCUMENT, variables: `{"p":${nestedText(7000)}}` });
      expect(res.statusCode).toBe(400);
      refusedAsTooDeep(res.json());
      const extensions = await get({ query: "{ __typename }", extensions: `{"x":${nestedText(7000)}}` });
      expect(extensions.statusCode).toBe(400);
      refusedAsTooDeep(extensions.json());
    });

    it("WebSocket: the same bound for a subscribe's payload, and 100,000 levels refused", async () => {
      const ok = await socket.run({ query: DOCUMENT, variables: { p: nested(62) } });
      expect(JSON.stringify(ok)).not.toContain("INVALID_JSON");
      const over = await socket.run({ query: DOCUMENT, variables: { p: nested(63) } });
      expect(over.errors).toEqual([
        expect.objectContaining({ extensions: { code: "INVALID_JSON", status: 400 } }),
      ]);
      // Deeper than any JSON.stringify can write: the client sends a placeholder, replaced on the wire.
      const PLACEHOLDER = '"__deep__"';
      const deepText = nestedText(100_000);
      class Deep extends WebSocket {
        override send(data: unknown, ...rest: unknown[]) {
          const text = String(data).replace(PLACEHOLDER, deepText);
          (super.send as (...a: unknown[]) => void)(text, ...rest);
        }
      }
      const { createClient } = await import("graphql-ws");
      const client = createClient({
        url: await webSocketUrl(t.app),
        webSocketImpl: Deep,
        retryAttempts: 0,
        connectionParams: { authorization: `Bearer ${token}` },
      });
      try {
        for (const [query, variables] of [
          [
            `mutation ($d: JSON) { CUST_command(source: "anag-1", name: "x", id: "1", data: $d) { message } }`,
            { d: "__deep__" },
          ],
          [DOCUMENT, { p: "__deep__" }],
        ] as const) {
          const errors = await new Promise<unknown>((resolve, reject) => {
            client.subscribe(
              { query, variables },
              {
                next: () => {},
                error: (err) => (Array.isArray(err) ? resolve(err) : reject(err)),
                complete: () => resolve(null),
              },
            );
          });
          expect(errors).toEqual([
            expect.objectContaining({ extensions: { code: "INVALID_JSON", status: 400 } }),
          ]);
        }
        // The socket still answers.
        const after = await socket.run({ query: "{ __typename }" });
        expect(after.results[0]?.data).toEqual({ __typename: "Query" });
      } finally {
        await client.dispose();
      }
    });
  });

  it("GET parameters that are not JSON are a 400 INVALID_JSON", async () => {
    const bad: Array<Record<string, string>> = [
      { query: "{ __typename }", variables: "{bad" },
      { query: "{ __typename }", extensions: "[" },
    ];
    for (const params of bad) {
      const res = await get(params);
      expect(res.statusCode).toBe(400);
      expect(res.json()).toMatchObject({
        errors: [
          {
            message: expect.stringMatching(/not valid JSON/),
            extensions: { code: "INVALID_JSON", status: 400 },
          },
        ],
      });
    }
    const fine = await get({ query: "{ __typename }", variables: "{}" });
    expect(fine.statusCode).toBe(200);
    expect(fine.json()).toEqual({ data: { __typename: "Query" } });
  });

  it("a body that is not a GraphQL request is one 400 BAD_REQUEST, nothing internal in it", async () => {
    for (const body of [
      "{}",
      "null",
      "true",
      "42",
      "[]",
      '"{ __typename }"',
      '{"variables":{}}',
      '{"query":1}',
    ]) {
      const res = await post(body);
      expect(res.statusCode, body).toBe(400);
      const answer = res.json();
      expect(answer.errors).toHaveLength(1);
      expect(answer.errors[0]).toEqual({
        message: expect.stringMatching(/JSON object with a `query` string/),
        extensions: { code: "BAD_REQUEST", status: 400 },
      });
    }
    const persistedAlone = await post(
      JSON.stringify({ extensions: { persistedQuery: { version: 1, sha256Hash: "0".repeat(64) } } }),
    );
    expect(persistedAlone.json().errors[0].extensions.code).toBe("PERSISTED_QUERY_NOT_FOUND");
    const fine = await post('{"query":"{ __typename }"}');
    expect(fine.json()).toEqual({ data: { __typename: "Query" } });
  });
});
