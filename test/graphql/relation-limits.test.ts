// To-many (reverse) relations come in bounded pages (issue 35 §5): GraphQL's relation fields take
// `limit` (default 100, at most 1000) and REST's `$expand` embeds at most 100 records per parent;
// the loader reads at most that many per parent, for every parent in one statement, and the
// estimates count a relation at that size.
import { readFile } from "node:fs/promises";
import { buildSchema, parse } from "graphql";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createValueEstimate } from "../../src/graphql/complexity.ts";
import { estimateListValues } from "../../src/rest/read-estimate.ts";
import { parseListParams } from "../../src/query/rest-params.ts";
import { DEFAULT_RELATION_ROWS, MAX_RELATION_ROWS } from "../../src/query/types.ts";
import { printFixtureSchema } from "../../src/schema/print.ts";
import { bearer, loginAs, SAMPLE_USERS } from "../helpers/auth.ts";
import { BACKENDS, createTestApp, SAMPLE_FIXTURE, type TestApp } from "../helpers/env.ts";
import { NO_RATE_LIMITS } from "../write/http.ts";
import { type GraphQLReply, graphqlClient } from "./helpers.ts";

type Gql = (query: string, variables?: Record<string, unknown>) => Promise<GraphQLReply>;

/** Lines added to the first order (more than the largest page) and to the second. */
const FIRST_LINES = MAX_RELATION_ROWS + 200;
const SECOND_LINES = 150;

describe.each(BACKENDS)("to-many relations in bounded pages (%s)", (backend) => {
  let t: TestApp;
  let anna: Gql;
  let token: string;
  let orders: number[];
  let statements: string[] = [];

  beforeAll(async () => {
    t = await createTestApp(backend, { fixture: "sample", env: NO_RATE_LIMITS });
    token = await loginAs(t.app, "anna", SAMPLE_USERS.anna.password);
    anna = graphqlClient(t.app, token);
    const { rows } = await t.services.db.query<{ ORD_ID: number }>(
      `SELECT "ORD_ID" FROM "TB_DOC_ORD00" WHERE "TENANT_ID" = 'acme' ORDER BY "ORD_ID"`,
    );
    orders = rows.map((r) => Number(r.ORD_ID));
    expect(orders.length).toBe(2);
    // Copies of each order's line under new ids: the first order gets FIRST_LINES more, the second SECOND_LINES.
    for (const [order, n, base] of [
      [orders[0]!, FIRST_LINES, 100_000],
      [orders[1]!, SECOND_LINES, 200_000],
    ] as const) {
      await t.services.db.query(
        `INSERT INTO "TB_DOC_ORDL00"
         SELECT (jsonb_populate_record(NULL::"TB_DOC_ORDL00", to_jsonb(l) || jsonb_build_object('ORDL_ID', $2::int + g))).*
           FROM "TB_DOC_ORDL00" AS l, generate_series(1, $3::int) AS g
          WHERE l."TENANT_ID" = 'acme' AND l."ORD_ID" = $1`,
        [order, base, n],
      );
    }
    for (const db of new Set([t.services.db, t.services.readDb])) {
      const query = db.query;
      db.query = ((text: string, ...rest: unknown[]) => {
        statements.push(text);
        return (query as (...a: unknown[]) => Promise<unknown>).call(db, text, ...rest);
      }) as typeof query;
    }
  });
  afterAll(async () => {
    await t?.close();
  });

  const lineStatements = () => statements.filter((s) => s.includes(`"TB_DOC_ORDL00"`));
  const ids = (lines: Array<{ ORDL_ID: number }>) => lines.map((l) => Number(l.ORDL_ID));
  const ascending = (list: number[]) => list.every((v, i) => i === 0 || list[i - 1]! < v);

  it("GraphQL: without limit, 100 lines per order (the first by id), every order in one statement", async () => {
    statements = [];
    const res = await anna(`{ ORD(source: "sales-1") { data { ORD_ID ORDL { ORDL_ID } } } }`);
    expect(res.body.errors).toBeUndefined();
    const data = res.body.data.ORD.data as Array<{ ORD_ID: number; ORDL: Array<{ ORDL_ID: number }> }>;
    expect(data.map((o) => [Number(o.ORD_ID), o.ORDL.length])).toEqual([
      [orders[0], DEFAULT_RELATION_ROWS],
      [orders[1], DEFAULT_RELATION_ROWS],
    ]);
    for (const o of data) expect(ascending(ids(o.ORDL))).toBe(true);
    expect(lineStatements()).toHaveLength(1);
  });

  it("GraphQL: limit per order, up to 1000; 100 aliases of one order answer 100 lines each", async () => {
    statements = [];
    const paged = await anna(
      `{ ORD(source: "sales-1", limit: 10) { data { ORD_ID ORDL(limit: ${MAX_RELATION_ROWS}) { ORDL_ID } } } }`,
    );
    expect(paged.body.errors).toBeUndefined();
    expect((paged.body.data.ORD.data as Array<{ ORDL: unknown[] }>).map((o) => o.ORDL.length)).toEqual([
      MAX_RELATION_ROWS,
      SECOND_LINES + 1,
    ]);
    expect(lineStatements()).toHaveLength(1);

    statements = [];
    const aliases = Array.from(
      { length: 100 },
      (_, i) => `o${i}: ORD_by_id(source: "sales-1", id: "${orders[0]}") { ORDL { ORDL_ID QTY } }`,
    ).join(" ");
    const many = await anna(`{ ${aliases} }`);
    expect(many.body.errors).toBeUndefined();
    const sizes = Object.values(many.body.data as Record<string, { ORDL: unknown[] }>).map(
      (o) => o.ORDL.length,
    );
    expect(sizes).toEqual(Array.from({ length: 100 }, () => DEFAULT_RELATION_ROWS));
    expect(lineStatements()).toHaveLength(1);
  });

  it("GraphQL: a limit past 1000 is a 400-style INVALID_PARAMETER error at the field", async () => {
    const res = await anna(
      `{ ORD_by_id(source: "sales-1", id: "${orders[0]}") { ORD_ID ORDL(limit: 5000) { ORDL_ID } } }`,
    );
    expect(res.body.errors).toHaveLength(1);
    expect(res.body.errors[0]).toMatchObject({
      message: "limit must be a whole number from 0 to 1000; got 5000.",
      path: ["ORD_by_id", "ORDL"],
      extensions: { code: "INVALID_PARAMETER", status: 400, field: "limit" },
    });
  });

  it("GraphQL's estimate counts a relation at its limit: 100 aliases × limit 1000 is refused before anything runs", async () => {
    const aliases = (limit: string) =>
      Array.from(
        { length: 100 },
        (_, i) => `o${i}: ORD_by_id(source: "sales-1", id: "${orders[0]}") { ORDL${limit} { ORDL_ID QTY } }`,
      ).join(" ");
    statements = [];
    const refused = await anna(`{ ${aliases("(limit: 1000)")} }`);
    expect(refused.body.data).toBeUndefined();
    expect(refused.body.errors[0].extensions).toMatchObject({
      code: "QUERY_TOO_COMPLEX",
      // Per alias: ORD_by_id, ORDL, and 1000 lines of two fields.
      details: { nodes: 100 * (1 + 1 + 1000 * 2), max_nodes: 100_000 },
    });
    expect(lineStatements()).toEqual([]);
    // The estimate the heavy-request lanes weigh: the same sizes, the default counted at 100.
    const schema = buildSchema(printFixtureSchema(JSON.parse(await readFile(SAMPLE_FIXTURE, "utf8"))));
    const estimate = createValueEstimate();
    expect(estimate(schema, parse(`{ ${aliases("(limit: 1000)")} }`))).toBe(100 * (1 + 1 + 1000 * 2));
    expect(estimate(schema, parse(`{ ${aliases("")} }`))).toBe(100 * (1 + 1 + DEFAULT_RELATION_ROWS * 2));
  });

  it("REST $expand: at most 100 lines per order, in a list and in a detail read", async () => {
    statements = [];
    const list = await t.app.inject({
      method: "GET",
      url: "/api/v4/core/ORD?source=sales-1&$expand=ORDL",
      headers: bearer(token),
    });
    expect(list.statusCode).toBe(200);
    const data = list.json().data as Array<{ ORD_ID: number; ORDL: Array<{ ORDL_ID: number }> }>;
    expect(data.map((o) => [Number(o.ORD_ID), o.ORDL.length])).toEqual([
      [orders[0], DEFAULT_RELATION_ROWS],
      [orders[1], DEFAULT_RELATION_ROWS],
    ]);
    for (const o of data) expect(ascending(ids(o.ORDL))).toBe(true);
    expect(lineStatements()).toHaveLength(1);
    const one = await t.app.inject({
      method: "GET",
      url: `/api/v4/core/ORD/${orders[0]}?source=sales-1&$expand=ORDL`,
      headers: bearer(token),
    });
    expect(one.statusCode).toBe(200);
    expect((one.json().data.ORDL as unknown[]).length).toBe(DEFAULT_RELATION_ROWS);
  });

  it("REST's heavy estimate counts a reverse relation at 100 records per row, a forward one at 1", () => {
    const ord = t.services.metadata.current().dimensions.get("ORD")!;
    const fields = ord.fields.length;
    expect(estimateListValues(parseListParams({ $expand: "ORDL" }), ord, 0)).toBe(
      100 * fields * (1 + DEFAULT_RELATION_ROWS),
    );
    expect(estimateListValues(parseListParams({ $expand: "CUST" }), ord, 0)).toBe(100 * fields * 2);
  });
});
