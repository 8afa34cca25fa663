// Keyset cursors of `D_aggregate` (decisions §21: "every list field"), as a list's: `first`/`after`
// with `meta.end_cursor` beside `meta.has_more`. The groups are paged in the grouping's order
// (order_by, then the group fields, which name a group), a walk page by page gives the whole
// grouping (ties on an aggregate, an AVG no JS number holds exactly, NULL groups), groups added
// between pages never make a group that stays repeat or go missing, and a cursor of a list, of
// another grouping or caller, or altered, is INVALID_CURSOR as a list's is.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compileGroupsPage } from "../../src/query/compile.ts";
import { planList } from "../../src/query/plan.ts";
import { emptyListQuery } from "../../src/query/types.ts";
import { loginAs, SAMPLE_USERS } from "../helpers/auth.ts";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";
import { authorizedDimension, handContext, sampleModel } from "../read/support.ts";
import { NO_RATE_LIMITS } from "../write/http.ts";
import { type GraphQLReply, graphqlClient } from "./helpers.ts";

type Gql = (query: string, variables?: Record<string, unknown>) => Promise<GraphQLReply>;
type Group = Record<string, unknown>;
type Customer = { CUST_ID: number; NAME: string; CREDIT_LIMIT?: number | null; VIP?: boolean | null };

const BASE_ID = 80_000;

/**
 * The page query of a grouping: group_by and aggregate written in the document (given by
 * variables, they would count as every field of the dimension toward the complexity bound).
 */
function pageQuery(group: readonly string[], agg: ReadonlyArray<{ fn: string; field?: string }>): string {
  const aggregate = agg.map((a) => (a.field ? `{fn: ${a.fn}, field: "${a.field}"}` : `{fn: ${a.fn}}`));
  return `query Page($first: Int, $after: String, $limit: Int, $order: String, $where: CUST_where) {
  CUST_aggregate(source: "anag-1", first: $first, after: $after, limit: $limit, group_by: ${JSON.stringify(group)}, aggregate: [${aggregate.join(", ")}], order_by: $order, where: $where) {
    data
    meta { total has_more end_cursor num_rows offset }
  }
}`;
}

describe.each(BACKENDS)("GraphQL keyset cursors of D_aggregate (%s)", (backend) => {
  let t: TestApp;
  let anna: Gql;
  let lucia: Gql;
  let nextId = BASE_ID;

  /** A page of a grouping as `as` asks for it; `group` and `agg` go into the document. */
  function page(variables: Record<string, unknown>, as: Gql = anna): Promise<GraphQLReply> {
    const {
      group = [],
      agg = [],
      ...rest
    } = variables as {
      group?: string[];
      agg?: Array<{ fn: string; field?: string }>;
    };
    return as(pageQuery(group, agg), rest);
  }

  async function insertCustomers(rows: Array<Omit<Customer, "CUST_ID">>): Promise<number[]> {
    const values = rows.map((r) => ({ TREC: "N", CUST_ID: nextId, CODE: `G-${nextId++}`, ...r }));
    await t.services.db.query(
      `INSERT INTO "TB_ANAG_CUST00"
       SELECT (jsonb_populate_record(NULL::"TB_ANAG_CUST00", to_jsonb(c) || v)).*
         FROM (SELECT * FROM "TB_ANAG_CUST00" WHERE "TENANT_ID" = 'acme' ORDER BY "CUST_ID" LIMIT 1) AS c,
              jsonb_array_elements($1::jsonb) AS v`,
      [JSON.stringify(values)],
    );
    return values.map((v) => v.CUST_ID);
  }

  beforeAll(async () => {
    t = await createTestApp(backend, { fixture: "sample", env: NO_RATE_LIMITS });
    anna = graphqlClient(t.app, await loginAs(t.app, "anna", SAMPLE_USERS.anna.password));
    lucia = graphqlClient(t.app, await loginAs(t.app, "lucia", SAMPLE_USERS.lucia.password));
    // Groups of one to three customers (COUNT ties), NULL credits and VIP flags among them.
    const credits = [100, null, 250];
    const vips = [true, false, null];
    const rows: Array<Omit<Customer, "CUST_ID">> = [];
    for (let g = 0; g < 14; g++)
      for (let k = 0; k <= g % 3; k++)
        rows.push({
          NAME: `Grp-${String(g).padStart(2, "0")}`,
          CREDIT_LIMIT: credits[k]!,
          VIP: vips[g % 3]!,
        });
    await insertCustomers(rows);
  });
  afterAll(async () => {
    await t?.close();
  });

  async function all(variables: Record<string, unknown>): Promise<Group[]> {
    const res = await page({ ...variables, limit: 1000 });
    expect(res.body.errors).toBeUndefined();
    expect(res.body.data.CUST_aggregate.meta.has_more).toBe(false);
    return res.body.data.CUST_aggregate.data;
  }

  /** Every page of a walk by `first`/`after`, with `between` run after each page but the last. */
  async function walk(
    first: number,
    variables: Record<string, unknown>,
    between?: (last: Group) => Promise<void>,
  ): Promise<Group[][]> {
    const pages: Group[][] = [];
    let after: string | null = null;
    for (let i = 0; i < 200; i++) {
      const res = await page({ ...variables, first, after });
      expect(res.body.errors).toBeUndefined();
      const { data, meta } = res.body.data.CUST_aggregate;
      pages.push(data);
      expect(meta).toMatchObject({ num_rows: first, offset: 0 });
      if (!meta.has_more) {
        expect(data.length).toBeLessThanOrEqual(first);
        return pages;
      }
      expect(data).toHaveLength(first);
      expect(typeof meta.end_cursor).toBe("string");
      after = meta.end_cursor;
      if (between) await between(data.at(-1)!);
    }
    throw new Error("the walk did not end");
  }

  const byName = { group: ["NAME"], agg: [{ fn: "COUNT" }], where: { NAME: { _like: "Grp-%" } } };

  it("walks the groups in the group fields' order: the pages concatenated are the whole grouping", async () => {
    const full = await all(byName);
    expect(full).toHaveLength(14);
    for (const size of [1, 3, 5]) {
      const pages = await walk(size, byName);
      expect(pages.flat()).toEqual(full);
      expect(pages.length).toBe(Math.ceil(full.length / size));
    }
    // meta.total counts every group of the grouping on every page, not those after the cursor.
    const first = await page({ ...byName, first: 4 });
    const second = await page({
      ...byName,
      first: 4,
      after: first.body.data.CUST_aggregate.meta.end_cursor,
    });
    expect(second.body.data.CUST_aggregate.meta).toMatchObject({ total: 14, has_more: true, offset: 0 });
    expect(second.body.data.CUST_aggregate.data).toEqual(full.slice(4, 8));
  });

  it("walks a sort on an aggregate with ties (COUNT desc; ties by the group fields)", async () => {
    const variables = { ...byName, order: "-COUNT" };
    const full = await all(variables);
    expect(full.map((g) => g.COUNT)).toEqual([...full.map((g) => g.COUNT as number)].sort((a, b) => b - a));
    expect(new Set(full.map((g) => g.COUNT)).size).toBeLessThan(full.length);
    for (const size of [1, 2, 4]) expect((await walk(size, variables)).flat()).toEqual(full);
  });

  it("walks groups tying on an AVG that no JS number holds exactly (the cursor keeps its digits)", async () => {
    // Each group's credits 100, 100 and 101: AVG 100.3333333333333333 in every group.
    const names = ["Avg-a", "Avg-b", "Avg-c", "Avg-d", "Avg-e"];
    await insertCustomers(
      names.flatMap((NAME) => [100, 100, 101].map((CREDIT_LIMIT) => ({ NAME, CREDIT_LIMIT }))),
    );
    const variables = {
      group: ["NAME"],
      agg: [
        { fn: "AVG", field: "CREDIT_LIMIT" },
        { fn: "SUM", field: "CREDIT_LIMIT" },
      ],
      order: "AVG_CREDIT_LIMIT,-SUM_CREDIT_LIMIT",
      where: { NAME: { _in: names } },
    };
    const full = await all(variables);
    expect(full.map((g) => g.NAME)).toEqual(names);
    for (const size of [1, 2]) expect((await walk(size, variables)).flat()).toEqual(full);
  });

  it("walks NULL groups (last in both directions) and a two-field grouping", async () => {
    for (const variables of [
      { ...byName, group: ["VIP"], order: "-VIP" },
      { ...byName, group: ["VIP", "CREDIT_LIMIT"] },
      { ...byName, group: ["CREDIT_LIMIT", "VIP"], order: "-CREDIT_LIMIT" },
    ]) {
      const full = await all(variables);
      const last = full.at(-1)!;
      expect(last[variables.group[0]!]).toBeNull();
      for (const size of [1, 2]) expect((await walk(size, variables)).flat()).toEqual(full);
    }
  });

  it("stays stable under inserts before and after the cursor between pages", async () => {
    const variables = { group: ["NAME"], agg: [{ fn: "COUNT" }], where: { NAME: { _like: "Mov-%" } } };
    await insertCustomers(["Mov-b", "Mov-d", "Mov-f", "Mov-h", "Mov-j"].map((NAME) => ({ NAME })));
    const before = (await all(variables)).map((g) => g.NAME);
    const added: string[] = [];
    let turn = 0;
    const pages = await walk(2, variables, async (last) => {
      // A group sorting before the cursor's, one after every group, and a row more in the
      // cursor's own group and in one after it (their COUNT changes, not their place).
      turn++;
      const rows = [`Mov-a${turn}`, `Mov-z${turn}`].map((NAME) => ({ NAME }));
      added.push(...rows.map((r) => r.NAME));
      await insertCustomers([...rows, { NAME: last.NAME as string }, { NAME: "Mov-j" }]);
    });
    const walked = pages.flat().map((g) => g.NAME as string);
    expect(new Set(walked).size).toBe(walked.length);
    expect(walked.filter((n) => !added.includes(n))).toEqual(before);
    // The groups added after the cursor were met, those before it never.
    expect(walked.filter((n) => n.startsWith("Mov-z"))).toEqual(added.filter((n) => n.startsWith("Mov-z")));
    expect(walked.some((n) => n.startsWith("Mov-a"))).toBe(false);
    // Mov-j counts the rows added to it before its page was read (one per page before it).
    const at = pages.findIndex((p) => p.some((g) => g.NAME === "Mov-j"));
    expect(at).toBeGreaterThan(0);
    expect(pages[at]!.find((g) => g.NAME === "Mov-j")!.COUNT).toBe(1 + at);
  });

  it("a limit/offset page gives its end_cursor too: a client switches to cursors from it", async () => {
    const full = await all(byName);
    const res = await page({ ...byName, limit: 3 });
    expect(res.body.data.CUST_aggregate.data).toEqual(full.slice(0, 3));
    const next = await page({
      ...byName,
      first: 3,
      after: res.body.data.CUST_aggregate.meta.end_cursor,
    });
    expect(next.body.data.CUST_aggregate.data).toEqual(full.slice(3, 6));
    const none = await page({ ...byName, first: 3, where: { NAME: { _eq: "Nobody" } } });
    expect(none.body.data.CUST_aggregate).toEqual({
      data: [],
      meta: { total: 0, has_more: false, end_cursor: null, num_rows: 3, offset: 0 },
    });
  });

  it("without group fields: one group, whose cursor has nothing after it", async () => {
    const variables = { ...byName, group: [] };
    const one = await page({ ...variables, first: 5 });
    expect(one.body.errors).toBeUndefined();
    expect(one.body.data.CUST_aggregate.data).toHaveLength(1);
    expect(one.body.data.CUST_aggregate.meta).toMatchObject({ has_more: false, total: 1 });
    const after = await page({
      ...variables,
      first: 5,
      after: one.body.data.CUST_aggregate.meta.end_cursor,
    });
    expect(after.body.errors).toBeUndefined();
    expect(after.body.data.CUST_aggregate).toMatchObject({
      data: [],
      meta: { has_more: false, end_cursor: null },
    });
  });

  describe("a cursor of a list, another grouping or caller, or altered, is INVALID_CURSOR", () => {
    const variables = { ...byName, order: "-COUNT" };
    let cursor: string;
    const invalid = (res: GraphQLReply, field = "CUST_aggregate") => {
      expect(res.body.errors?.[0]?.extensions).toMatchObject({
        code: "INVALID_CURSOR",
        status: 400,
        field: "after",
      });
      expect(res.body.data?.[field] ?? null).toBeNull();
    };

    beforeAll(async () => {
      const res = await page({ ...variables, first: 3 });
      cursor = res.body.data.CUST_aggregate.meta.end_cursor;
      expect(typeof cursor).toBe("string");
      const ok = await page({ ...variables, first: 3, after: cursor });
      expect(ok.body.errors).toBeUndefined();
    });

    it("another grouping, aggregate, sort or filter", async () => {
      invalid(await page({ ...variables, first: 3, after: cursor, group: ["NAME", "VIP"] }));
      invalid(await page({ ...variables, first: 3, after: cursor, agg: [{ fn: "COUNT", field: "VIP" }] }));
      invalid(await page({ ...variables, first: 3, after: cursor, order: "COUNT" }));
      invalid(await page({ ...variables, first: 3, after: cursor, where: { NAME: { _like: "Avg-%" } } }));
    });

    it("a list's cursor on a grouping, a grouping's on a list", async () => {
      const list = await anna(`{ CUST(source: "anag-1", first: 2) { meta { end_cursor } } }`);
      const listCursor = list.body.data.CUST.meta.end_cursor;
      invalid(await page({ ...variables, first: 3, after: listCursor }));
      invalid(
        await anna(
          `query ($after: String) { CUST(source: "anag-1", first: 2, after: $after) { data { CUST_ID } } }`,
          {
            after: cursor,
          },
        ),
        "CUST",
      );
    });

    it("another user", async () => {
      invalid(await page({ ...variables, first: 3, after: cursor }, lucia));
    });

    it("altered, or not a cursor at all", async () => {
      const bytes = Buffer.from(cursor, "base64url");
      for (const at of [0, 1, 13, bytes.length - 1]) {
        const changed = Buffer.from(bytes);
        changed[at]! ^= 1;
        invalid(await page({ ...variables, first: 3, after: changed.toString("base64url") }));
      }
      invalid(await page({ ...variables, first: 3, after: "not a cursor" }));
    });
  });

  it("first with limit, first/after with offset, or first out of 1..1000 is INVALID_PARAMETER", async () => {
    const q = (args: string) =>
      anna(
        `{ CUST_aggregate(source: "anag-1", group_by: ["NAME"], aggregate: [{fn: COUNT}], ${args}) { data } }`,
      );
    const cases: Array<[string, string]> = [
      ["first: 2, limit: 2", "first"],
      ["first: 2, offset: 2", "offset"],
      ["first: 0", "first"],
      ["first: 1001", "first"],
    ];
    for (const [args, field] of cases) {
      const res = await q(args);
      expect(res.body.errors?.[0]?.extensions).toMatchObject({
        code: "INVALID_PARAMETER",
        status: 400,
        field,
      });
      expect(res.body.data?.CUST_aggregate ?? null).toBeNull();
    }
  });
});

describe("the keyset of a grouped page's SQL", () => {
  const model = sampleModel();
  const dim = authorizedDimension(model, "CUST");
  const plan = (after: unknown[] | null, sort: Array<{ field: string; direction: "asc" | "desc" }> = []) => {
    const p = planList(
      handContext({ source: "anag-1" }),
      model,
      dim,
      emptyListQuery({
        groupBy: ["CITY_ID"],
        aggregates: [{ fn: "AVG", field: "CREDIT_LIMIT", alias: "AVG_CREDIT_LIMIT" }],
        sort,
        numRows: 5,
        keyset: { after: after as never },
      }),
    );
    if (p.kind !== "groups") throw new Error("a groups plan");
    return p;
  };

  it("HAVING the groups after the cursor's; the count of groups is not narrowed", () => {
    const q = compileGroupsPage(
      plan(["100.3333333333333333", "MI"], [{ field: "AVG_CREDIT_LIMIT", direction: "desc" }]),
    );
    expect(q.text).toContain(`avg(t."CREDIT_LIMIT")::text AS "k0"`);
    expect(q.text).toContain(
      `GROUP BY t."CITY_ID"\nHAVING ((avg(t."CREDIT_LIMIT") < $2 OR avg(t."CREDIT_LIMIT") IS NULL) OR (avg(t."CREDIT_LIMIT") = $2 AND (t."CITY_ID" > $3 OR t."CITY_ID" IS NULL)))`,
    );
    expect(q.text).toContain(
      `FROM (SELECT count(*) AS "__total" FROM (SELECT 1 FROM "TB_ANAG_CUST00" AS t\nWHERE t."TENANT_ID" = $1 AND t."TREC" <> 'C'\nGROUP BY t."CITY_ID") AS g) AS c`,
    );
    expect(q.params).toEqual(["acme", "100.3333333333333333", "MI", 5, 0]);
    // A NULL group last: nothing after it.
    expect(compileGroupsPage(plan([null])).text).toContain(`GROUP BY t."CITY_ID"\nHAVING false`);
  });

  it("a value that does not fit the grouping's sort is INVALID_CURSOR", () => {
    const refused = expect.objectContaining({ code: "INVALID_CURSOR" });
    expect(() => plan(["MI", "x"])).toThrow(refused);
    expect(() => plan([1.5, "MI"], [{ field: "AVG_CREDIT_LIMIT", direction: "asc" }])).toThrow(refused);
    expect(() => plan(["1; DROP", "MI"], [{ field: "AVG_CREDIT_LIMIT", direction: "asc" }])).toThrow(refused);
  });
});
