// No single GraphQL request may take the service down (issue 18 §3): introspection, fragments,
// aliases and list sizes all count towards the operation's limits, checked before graphql-js
// validates it (QUERY_TOO_COMPLEX); a whole operation's mutations share one request's write
// bounds (records, event bytes), so aliases cannot multiply them.
import { getIntrospectionQuery } from "graphql";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_SOURCE_NESTING, sourceNesting } from "../../src/graphql/complexity.ts";
import { loginAs, SAMPLE_USERS } from "../helpers/auth.ts";
import { createTestApp, type TestApp } from "../helpers/env.ts";
import { NO_RATE_LIMITS } from "../write/http.ts";
import { type GraphQLReply, graphqlClient } from "./helpers.ts";
import { graphqlSocket, webSocketUrl } from "./ws.ts";

type Gql = (query: string, variables?: Record<string, unknown>) => Promise<GraphQLReply>;

const MAX_BATCH_SIZE = 5;
const EVENTS_MAX_BYTES = 64 * 1024;

/** The request answers (validation finished) within `ms`: a deadline, not a timing. */
async function within<T>(ms: number, work: () => Promise<T>): Promise<T> {
  const started = performance.now();
  const result = await work();
  expect(performance.now() - started).toBeLessThan(ms);
  return result;
}

describe("GraphQL request bounds", () => {
  let t: TestApp;
  let anna: Gql;
  let lucia: Gql;
  let annaToken: string;
  let statements: string[] = [];
  let inFlight = 0;
  let mostInFlight = 0;

  beforeAll(async () => {
    t = await createTestApp("pglite", {
      fixture: "sample",
      env: {
        ...NO_RATE_LIMITS,
        MAX_BATCH_SIZE: String(MAX_BATCH_SIZE),
        REQUEST_EVENTS_MAX_BYTES: String(EVENTS_MAX_BYTES),
        GRAPHQL_TENANT_STATEMENTS: "3",
        // The complexity limits measured on documents past the default document limit.
        GRAPHQL_MAX_DOCUMENT_BYTES: "1048576",
      },
    });
    annaToken = await loginAs(t.app, "anna", SAMPLE_USERS.anna.password);
    anna = graphqlClient(t.app, annaToken);
    lucia = graphqlClient(t.app, await loginAs(t.app, "lucia", SAMPLE_USERS.lucia.password));
    const query = t.services.db.query;
    t.services.db.query = (async (text: string, ...rest: unknown[]) => {
      statements.push(text);
      const counted = text.includes(`"TB_ANAG_CUST00"`);
      if (counted) mostInFlight = Math.max(mostInFlight, ++inFlight);
      try {
        return await (query as (...a: unknown[]) => Promise<unknown>)(text, ...rest);
      } finally {
        if (counted) inFlight--;
      }
    }) as typeof query;
  });
  afterAll(async () => {
    await t?.close();
  });

  function dataStatements(): string[] {
    const tables = [...t.services.metadata.current().dimensions.values()].map((d) => `"${d.tableName}"`);
    return statements.filter((s) => tables.some((table) => s.includes(table)));
  }

  async function custRows(): Promise<number> {
    const { rows } = await t.services.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM "TB_ANAG_CUST00"`,
    );
    return rows[0]!.n;
  }

  it("150 aliased __type × 150 aliased fields from a read-only user: QUERY_TOO_COMPLEX, quickly", async () => {
    const inner = Array.from({ length: 150 }, (_, j) => `f${j}: fields { name }`).join(" ");
    const outer = Array.from({ length: 150 }, (_, i) => `t${i}: __type(name: "Mutation") { ${inner} }`).join(
      " ",
    );
    const res = await within(5000, () => lucia(`{ ${outer} }`));
    expect(res.body.data).toBeUndefined();
    expect(res.body.errors).toHaveLength(1);
    expect(res.body.errors[0].extensions.code).toBe("QUERY_TOO_COMPLEX");
  });

  it("introspection fields and their aliases count: 30 aliased __type × 30 aliased fields", async () => {
    const inner = Array.from({ length: 30 }, (_, j) => `f${j}: fields { name }`).join(" ");
    const outer = Array.from({ length: 30 }, (_, i) => `t${i}: __type(name: "Mutation") { ${inner} }`).join(
      " ",
    );
    const res = await lucia(`{ ${outer} }`);
    expect(res.body.errors[0].extensions).toMatchObject({
      code: "QUERY_TOO_COMPLEX",
      details: { cost: 30 * (1 + 30 * 2), max_cost: 1000 },
    });
  });

  it("introspection nested through lists is counted at the schema's sizes", async () => {
    // Each `fields` multiplies by the schema's widest type: refused, though it selects 9 fields.
    const res = await lucia(
      `{ __schema { types { fields { type { fields { type { fields { type { fields { name } } } } } } } } } }`,
    );
    expect(res.body.errors[0].extensions).toMatchObject({
      code: "QUERY_TOO_COMPLEX",
      details: { introspection: expect.any(Number), max_introspection: expect.any(Number) },
    });
  });

  it("GraphiQL's full introspection query and a normal query still work", async () => {
    const full = await lucia(
      getIntrospectionQuery({
        descriptions: true,
        specifiedByUrl: true,
        directiveIsRepeatable: true,
        schemaDescription: true,
        inputValueDeprecation: true,
        oneOf: true,
      }),
    );
    expect(full.body.errors).toBeUndefined();
    expect(full.body.data.__schema.types.length).toBeGreaterThan(10);
    const normal = await anna(
      `query Page($n: Int = 50) { CUST(source: "anag-1", limit: $n) { data { CUST_ID NAME CITY { NAME } } meta { total } } }`,
    );
    expect(normal.body.errors).toBeUndefined();
    expect(normal.body.data.CUST.data.length).toBeGreaterThan(0);
  });

  it("30 fragments each spreading the previous twice: refused within a second", async () => {
    const fragments = [`fragment F0 on CUST { NAME }`];
    for (let i = 1; i <= 30; i++) fragments.push(`fragment F${i} on CUST { ...F${i - 1} ...F${i - 1} }`);
    const doc = `{ CUST(source: "anag-1", limit: 1) { data { ...F30 } } } ${fragments.join(" ")}`;
    statements = [];
    const res = await within(1000, () => anna(doc));
    expect(res.body.errors[0].extensions).toMatchObject({
      code: "QUERY_TOO_COMPLEX",
      details: { cost: expect.any(Number), max_cost: 1000 },
    });
    expect(res.body.errors[0].extensions.details.cost).toBeGreaterThan(2 ** 30);
    // Twice as many fragments: still one walk per fragment.
    for (let i = 31; i <= 60; i++) fragments.push(`fragment F${i} on CUST { ...F${i - 1} ...F${i - 1} }`);
    const doubled = await within(1000, () =>
      anna(`{ CUST(source: "anag-1", limit: 1) { data { ...F60 } } } ${fragments.join(" ")}`),
    );
    expect(doubled.body.errors[0].extensions.code).toBe("QUERY_TOO_COMPLEX");
    expect(dataStatements()).toEqual([]);
  });

  it("500 operations spreading a 500-fragment chain: measured once per fragment, within the deadline", async () => {
    const chain = [`fragment G0 on CUST { NAME }`];
    for (let i = 1; i < 500; i++) chain.push(`fragment G${i} on CUST { ...G${i - 1} }`);
    const ops = Array.from(
      { length: 500 },
      (_, i) => `query Q${i} { CUST(source: "anag-1", limit: 1) { data { ...G499 } } }`,
    );
    statements = [];
    // graphql-js's own validation of this document takes 0.6–1.5 s on a loaded two-core host; the
    // deadline is there for a blow-up (every operation walking the chain again, each spread again).
    const res = await within(5000, () => anna(`${ops.join(" ")} ${chain.join(" ")}`));
    // Valid and within every limit; yoga then asks which operation to run.
    expect(res.body.errors[0].message).toMatch(/operation/i);
    expect(dataStatements()).toEqual([]);
  });

  it("alias bombs are refused before anything runs", async () => {
    statements = [];
    const typenames = Array.from({ length: 900 }, (_, i) => `a${i}: __typename`).join(" ");
    const aliased = await within(2000, () => anna(`{ ${typenames} }`));
    expect(aliased.body.errors[0].extensions).toMatchObject({
      code: "QUERY_TOO_COMPLEX",
      details: { aliases: 900, max_aliases: 100 },
    });
    // The same field repeated without aliases: counted as fields (graphql-js would compare each pair).
    const repeated = Array.from({ length: 15_000 }, () => "__typename").join(" ");
    const same = await within(2000, () => anna(`{ ${repeated} }`));
    expect(same.body.errors[0].extensions).toMatchObject({
      code: "QUERY_TOO_COMPLEX",
      details: { cost: 15_000, max_cost: 1000 },
    });
    const tokens = await within(2000, () => anna(`{ ${"__typename ".repeat(50_000)} }`));
    expect(tokens.body.errors[0].extensions).toMatchObject({
      code: "QUERY_TOO_COMPLEX",
      details: { max_tokens: 20_000 },
    });
    expect(dataStatements()).toEqual([]);
  });

  it("a field repeated under the cost limit runs while graphql-js checks it merges, else one QUERY_TOO_COMPLEX naming that limit", async () => {
    // graphql-js compares the fields of one response name in pairs and stops validating past
    // 500,000 steps with a bare "Validation aborted.": 700 `__typename` pass, 900 do not.
    statements = [];
    const within700 = await anna(`{ ${"__typename ".repeat(700)} }`);
    expect(within700).toEqual({ status: 200, body: { data: { __typename: "Query" } } });
    const refusal = {
      message:
        "The document repeats fields of one response name too often: checking that they merge takes more than 500000 steps, the most validation takes. Select each field once per selection set.",
      extensions: { code: "QUERY_TOO_COMPLEX", status: 400, details: { max_field_merge_steps: 500_000 } },
    };
    const repeated = `{ ${"__typename ".repeat(900)} }`;
    // Every transport, and again (the kept validation result): that one error.
    for (let i = 0; i < 2; i++) {
      for (const accept of ["application/json", "application/graphql-response+json"]) {
        const res = await t.app.inject({
          method: "POST",
          url: "/graphql",
          headers: { authorization: `Bearer ${annaToken}`, "content-type": "application/json", accept },
          payload: { query: repeated },
        });
        // As every refusal at validation: 200 for application/json (GraphQL over HTTP), else 400.
        expect(res.statusCode).toBe(accept === "application/json" ? 200 : 400);
        expect(res.json()).toEqual({ errors: [refusal] });
      }
      const get = await t.app.inject({
        method: "GET",
        url: `/graphql?${new URLSearchParams({ query: repeated })}`,
        headers: { authorization: `Bearer ${annaToken}`, accept: "application/graphql-response+json" },
      });
      expect(get.statusCode).toBe(400);
      expect(get.json()).toEqual({ errors: [refusal] });
      const socket = graphqlSocket(await webSocketUrl(t.app), annaToken);
      try {
        expect(await socket.run({ query: repeated })).toEqual({ results: [], errors: [refusal] });
      } finally {
        await socket.dispose();
      }
    }
    // Nested: 30 `CUST_by_id` of 30 repeated fields each (930 fields) are compared pair by pair.
    const nested = await anna(
      `{ ${`CUST_by_id(source: "anag-1", id: 1) { ${"NAME ".repeat(30)} } `.repeat(30)} }`,
    );
    expect(nested.body).toEqual({ errors: [refusal] });
    expect(dataStatements()).toEqual([]);
  });

  it("arguments nested deeper than JSON bodies may be are refused, as literals and as variables", async () => {
    const nested = (n: number) => `${"{_and: [".repeat(n)}{NAME: {_eq: "x"}}${"]}".repeat(n)}`;
    const ok = await anna(`{ CUST(source: "anag-1", where: ${nested(20)}) { data { NAME } } }`);
    expect(ok.body.errors).toBeUndefined();
    const deep = await anna(`{ CUST(source: "anag-1", where: ${nested(100)}) { data { NAME } } }`);
    expect(deep.body.errors[0].extensions).toMatchObject({
      code: "QUERY_TOO_COMPLEX",
      details: { input_depth: 202, max_input_depth: 64 },
    });
    // Deeper than graphql-js's recursive parser can go: refused the same way, not a 500.
    const deeper = await anna(`{ CUST(source: "anag-1", where: ${nested(1500)}) { data { NAME } } }`);
    expect(deeper.body.errors[0].extensions.code).toBe("QUERY_TOO_COMPLEX");
    const selections = await anna(
      `{ ${'CUST_by_id(source: "anag-1", id: 1) { '.repeat(1)}${"CITY { ".repeat(3000)}NAME${" }".repeat(3001)} }`,
    );
    expect(selections.body.errors[0].extensions.code).toBe("QUERY_TOO_COMPLEX");
    let where: Record<string, unknown> = { NAME: { _eq: "x" } };
    for (let i = 0; i < 1000; i++) where = { _and: [where] };
    const variable = await anna(
      `query ($w: CUST_where) { CUST(source: "anag-1", where: $w) { data { NAME } } }`,
      { w: where },
    );
    expect(variable.status).toBe(400);
    expect(JSON.stringify(variable.body)).not.toContain("INTERNAL_ERROR");
  });

  it("list sizes multiply: limit × nested lists, a variable limit at the largest page", async () => {
    statements = [];
    const nested = await anna(
      `{ CUST(source: "anag-1", limit: 1000) { data { CUST_ID ADDR { ADDR_ID KIND CITY_ID } } } }`,
    );
    expect(nested.body.errors[0].extensions).toMatchObject({
      code: "QUERY_TOO_COMPLEX",
      details: { nodes: 1000 * (1 + 1 + 100 * 3) + 2, max_nodes: 100_000 },
    });
    const byVariable = await anna(
      `query ($n: Int) { CUST(source: "anag-1", limit: $n) { data { CUST_ID ADDR { ADDR_ID } } } }`,
      { n: 5 },
    );
    expect(byVariable.body.errors[0].extensions).toMatchObject({
      code: "QUERY_TOO_COMPLEX",
      details: { nodes: 1000 * (1 + 1 + 100) + 2 },
    });
    expect(dataStatements()).toEqual([]);
    // The same with a small literal limit runs.
    const small = await anna(`{ CUST(source: "anag-1", limit: 5) { data { CUST_ID ADDR { ADDR_ID } } } }`);
    expect(small.body.errors).toBeUndefined();
    expect(small.body.data.CUST.data.length).toBeGreaterThan(0);
  });

  it("one tenant's aliased reads run at most GRAPHQL_TENANT_STATEMENTS at a time", async () => {
    const counts = Array.from(
      { length: 60 },
      (_, i) => `c${i}: CUST_count(source: "anag-1", filter: "CREDIT_LIMIT gt ${i}")`,
    ).join(" ");
    mostInFlight = 0;
    const [a, b] = await Promise.all([anna(`{ ${counts} }`), anna(`{ ${counts} }`)]);
    expect(a.body.errors).toBeUndefined();
    expect(Object.keys(b.body.data)).toHaveLength(60);
    expect(mostInFlight).toBe(3);
  });

  it("aliased mutations over the request's record bound are refused whole: nothing is written", async () => {
    const before = await custRows();
    const creates = Array.from(
      { length: 8 },
      (_, i) => `c${i}: CUST_create(source: "anag-1", data: { NAME: "Alias ${i}" }) { event_id }`,
    ).join(" ");
    const res = await anna(`mutation { ${creates} }`);
    expect(res.body.data).toBeNull();
    expect(res.body.errors).toHaveLength(1);
    expect(res.body.errors[0].extensions).toMatchObject({
      code: "PAYLOAD_TOO_LARGE",
      status: 413,
      details: { max_batch_size: MAX_BATCH_SIZE, count: 8 },
    });
    expect(res.body.errors[0].message).toContain("Nothing was written");
    expect(await custRows()).toBe(before);

    // Batches count their items, through fragments and variables too: 3 + 3 is over 5.
    const batches = await anna(
      `mutation ($items: [CUST_create_input!]!) { a: CUST_batch_create(source: "anag-1", data: $items) { success } ...B }
       fragment B on Mutation { b: CUST_batch_create(source: "anag-1", data: $items) { success } }`,
      { items: [{ NAME: "B1" }, { NAME: "B2" }, { NAME: "B3" }] },
    );
    expect(batches.body.errors).toHaveLength(1);
    expect(batches.body.errors[0].extensions).toMatchObject({
      code: "PAYLOAD_TOO_LARGE",
      details: { max_batch_size: 5, count: 6 },
    });
    expect(await custRows()).toBe(before);

    // Within the bound, every field writes; a field skipped by @skip counts nothing.
    const fits = await anna(
      `mutation ($no: Boolean!) { a: CUST_create(source: "anag-1", data: { NAME: "Fits 1" }) { event_id }
         b: CUST_batch_create(source: "anag-1", data: [{ NAME: "Fits 2" }, { NAME: "Fits 3" }, { NAME: "Fits 4" }, { NAME: "Fits 5" }]) { success }
         c: CUST_create(source: "anag-1", data: { NAME: "Skipped" }) @skip(if: $no) { event_id } }`,
      { no: true },
    );
    expect(fits.body.errors).toBeUndefined();
    expect(await custRows()).toBe(before + 5);
  });

  it("aliased mutations over the request's event bytes are refused whole: nothing is written", async () => {
    const before = await custRows();
    const notes = "x".repeat(20_000);
    const creates = Array.from(
      { length: 5 },
      (_, i) =>
        `c${i}: CUST_create(source: "anag-1", data: { NAME: "Events ${i}", NOTES: $notes }) { event_id }`,
    ).join(" ");
    const res = await anna(`mutation ($notes: String) { ${creates} }`, { notes });
    // 5 × 20 KB of values cannot fit in 64 KiB of events: refused before the first write.
    expect(res.body.data).toBeNull();
    expect(res.body.errors).toHaveLength(1);
    expect(res.body.errors[0].extensions).toMatchObject({
      code: "PAYLOAD_TOO_LARGE",
      details: { max_event_bytes: EVENTS_MAX_BYTES },
    });
    expect(await custRows()).toBe(before);
  });

  it("a mutation stopped after its first fields committed names them", async () => {
    const before = await custRows();
    // The second create is refused by the pipeline (an unknown field) after the first committed.
    const res = await anna(
      `mutation { first: CUST_create(source: "anag-1", data: { NAME: "Committed" }) { event_id }
         second: CUST_update(source: "anag-1", id: "999999", data: { NAME: "Nope" }) { event_id }
         third: CUST_create(source: "anag-1", data: { NAME: "Never" }) { event_id } }`,
    );
    expect(res.body.data).toBeNull();
    expect(res.body.errors).toHaveLength(1);
    expect(res.body.errors[0].path).toEqual(["second"]);
    expect(res.body.errors[0].extensions.committed).toEqual(["first"]);
    expect(await custRows()).toBe(before + 1);
  });
});

describe("sourceNesting: the pre-parse nesting scan", () => {
  it("counts brackets of every kind, not those inside strings, block strings or comments", () => {
    expect(sourceNesting("{ a(x: [{ b: 1 }]) { c } }")).toBe(4);
    expect(sourceNesting('{ a(x: "{{{{[[[((") }')).toBe(2);
    expect(sourceNesting('{ a(x: """ {{{ \\""" {{ """) }')).toBe(2);
    expect(sourceNesting("# {{{{{{\n{ a }")).toBe(1);
    expect(sourceNesting(`${"{".repeat(MAX_SOURCE_NESTING + 1)}`)).toBe(MAX_SOURCE_NESTING + 1);
  });
});
