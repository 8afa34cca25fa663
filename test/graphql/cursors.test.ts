// Keyset cursors of GraphQL lists (issue 38 §4, decisions §21): `first`/`after` with
// `meta.end_cursor`. A walk page by page gives the whole ordered list (default order, a
// non-unique key, a mixed-direction sort with NULLs), rows inserted between pages never make a
// row that stays repeat or go missing, and a cursor of another list, sort, filter or caller, or an
// altered one, is INVALID_CURSOR. A cursor is opaque (encrypted): it shows no sort value, not even
// of a field the list hides. A cursor page holds at least one row (first ≥ 1). The keyset is a
// predicate of the page's SQL.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type CursorScope, cursorCodec } from "../../src/graphql/cursor.ts";
import { compileRecordsPage, compileRecordsSelect } from "../../src/query/compile.ts";
import { planList } from "../../src/query/plan.ts";
import { emptyListQuery } from "../../src/query/types.ts";
import { loginAs, SAMPLE_USERS } from "../helpers/auth.ts";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";
import { authorizedDimension, handContext, sampleModel } from "../read/support.ts";
import { NO_RATE_LIMITS } from "../write/http.ts";
import { type GraphQLReply, graphqlClient } from "./helpers.ts";

type Gql = (query: string, variables?: Record<string, unknown>) => Promise<GraphQLReply>;
type Row = { CUST_ID: number; NAME: string; CREDIT_LIMIT: number | null; VIP: boolean | null };

const NAMES = ["Beta", "Alpha", "Gamma"];
const CREDITS = [100, null, 250, 100, null];
const VIPS = [true, false, null, true];
/** Customers added to acme's few: names, credits and VIP flags repeat, with NULLs. */
const ADDED = 40;
const BASE_ID = 70_000;

const PAGE = `query Page($first: Int, $after: String, $order: [CUST_order_by!], $where: CUST_where) {
  CUST(source: "anag-1", first: $first, after: $after, order_by: $order, where: $where) {
    data { CUST_ID NAME CREDIT_LIMIT VIP }
    meta { total has_more end_cursor num_rows offset }
  }
}`;

const ALL = `query All($order: [CUST_order_by!], $where: CUST_where) {
  CUST(source: "anag-1", limit: 1000, order_by: $order, where: $where) { data { CUST_ID NAME CREDIT_LIMIT VIP } meta { total } }
}`;

describe.each(BACKENDS)("GraphQL keyset cursors (%s)", (backend) => {
  let t: TestApp;
  let anna: Gql;
  let lucia: Gql;

  async function insertCustomers(rows: Array<Partial<Row> & { CUST_ID: number; NAME: string }>) {
    const values = rows.map((r) => ({ TREC: "N", CODE: `K-${r.CUST_ID}`, ...r }));
    await t.services.db.query(
      `INSERT INTO "TB_ANAG_CUST00"
       SELECT (jsonb_populate_record(NULL::"TB_ANAG_CUST00", to_jsonb(c) || v)).*
         FROM (SELECT * FROM "TB_ANAG_CUST00" WHERE "TENANT_ID" = 'acme' ORDER BY "CUST_ID" LIMIT 1) AS c,
              jsonb_array_elements($1::jsonb) AS v`,
      [JSON.stringify(values)],
    );
  }

  beforeAll(async () => {
    t = await createTestApp(backend, { fixture: "sample", env: NO_RATE_LIMITS });
    anna = graphqlClient(t.app, await loginAs(t.app, "anna", SAMPLE_USERS.anna.password));
    lucia = graphqlClient(t.app, await loginAs(t.app, "lucia", SAMPLE_USERS.lucia.password));
    await insertCustomers(
      Array.from({ length: ADDED }, (_, i) => ({
        CUST_ID: BASE_ID + i,
        NAME: NAMES[i % NAMES.length]!,
        CREDIT_LIMIT: CREDITS[i % CREDITS.length]!,
        VIP: VIPS[i % VIPS.length]!,
      })),
    );
  });
  afterAll(async () => {
    await t?.close();
  });

  async function all(variables: Record<string, unknown> = {}): Promise<Row[]> {
    const res = await anna(ALL, variables);
    expect(res.body.errors).toBeUndefined();
    return res.body.data.CUST.data;
  }

  /** Every page of a walk by `first`/`after`, with `between` run after each page but the last. */
  async function walk(
    first: number,
    variables: Record<string, unknown> = {},
    between?: (page: number, last: Row) => Promise<void>,
  ): Promise<Row[][]> {
    const pages: Row[][] = [];
    let after: string | null = null;
    for (let i = 0; i < 200; i++) {
      const res = await anna(PAGE, { ...variables, first, after });
      expect(res.body.errors).toBeUndefined();
      const { data, meta } = res.body.data.CUST;
      pages.push(data);
      expect(meta.num_rows).toBe(first);
      expect(meta.offset).toBe(0);
      if (!meta.has_more) {
        expect(data.length).toBeLessThanOrEqual(first);
        return pages;
      }
      expect(data).toHaveLength(first);
      expect(typeof meta.end_cursor).toBe("string");
      after = meta.end_cursor;
      if (between) await between(i, data.at(-1)!);
    }
    throw new Error("the walk did not end");
  }

  const ids = (rows: readonly Row[]) => rows.map((r) => Number(r.CUST_ID));

  it("walks the default order (by id) page by page: the pages concatenated are the whole list", async () => {
    const full = await all();
    expect(full.length).toBeGreaterThan(ADDED);
    const pages = await walk(7);
    expect(ids(pages.flat())).toEqual(ids(full));
    expect(pages.length).toBe(Math.ceil(full.length / 7));
  });

  it("walks a sort on a non-unique field (NAME asc; ties by id)", async () => {
    const order = [{ NAME: "asc" }];
    const full = await all({ order });
    const names = full.map((r) => r.NAME);
    expect(new Set(names).size).toBeLessThan(names.length);
    const pages = await walk(5, { order });
    expect(ids(pages.flat())).toEqual(ids(full));
  });

  it("walks a mixed-direction two-key sort with NULLs (VIP desc, CREDIT_LIMIT asc; NULL last in both)", async () => {
    const order = [{ VIP: "desc" }, { CREDIT_LIMIT: "asc" }];
    const full = await all({ order });
    expect(full.some((r) => r.VIP === null)).toBe(true);
    expect(full.some((r) => r.CREDIT_LIMIT === null)).toBe(true);
    // NULLs last in both directions (decisions §11).
    expect(full.at(-1)!.VIP).toBeNull();
    for (const size of [1, 3, 4]) {
      const pages = await walk(size, { order });
      expect(ids(pages.flat())).toEqual(ids(full));
    }
  });

  it("meta.total is the whole filtered set on every page; end_cursor is null on an empty page", async () => {
    const where = { NAME: { _eq: "Alpha" } };
    const full = await all({ where });
    const first = await anna(PAGE, { first: 2, where });
    expect(first.body.data.CUST.meta).toMatchObject({ total: full.length, has_more: true });
    const second = await anna(PAGE, { first: 2, where, after: first.body.data.CUST.meta.end_cursor });
    expect(second.body.data.CUST.meta.total).toBe(full.length);
    expect(ids(second.body.data.CUST.data)).toEqual(ids(full.slice(2, 4)));
    const none = await anna(PAGE, { first: 2, where: { NAME: { _eq: "Nobody" } } });
    expect(none.body.data.CUST).toEqual({
      data: [],
      meta: { total: 0, has_more: false, end_cursor: null, num_rows: 2, offset: 0 },
    });
  });

  it("stays stable under inserts before and after the cursor between pages", async () => {
    const order = [{ NAME: "asc" }];
    const before = ids(await all({ order }));
    let next = BASE_ID + 1000;
    const inserted: number[] = [];
    const pages = await walk(6, { order }, async (_page, last) => {
      // One row sorting before the cursor's (an earlier name), one tying with it (a larger id:
      // after it), one after every name.
      const rows = [
        { CUST_ID: next++, NAME: "Aaa" },
        { CUST_ID: next++, NAME: last.NAME },
        { CUST_ID: next++, NAME: "Zzz" },
      ];
      inserted.push(...rows.map((r) => r.CUST_ID));
      await insertCustomers(rows);
    });
    const walked = ids(pages.flat());
    expect(new Set(walked).size).toBe(walked.length);
    const stayed = walked.filter((id) => !inserted.includes(id));
    expect(stayed).toEqual(before);
    // The rows inserted after the cursor were met; those before it were not.
    const seen = new Set(walked);
    const after = await all({ order });
    expect(after.filter((r) => r.NAME === "Zzz").every((r) => seen.has(Number(r.CUST_ID)))).toBe(true);
    expect(after.filter((r) => r.NAME === "Aaa").some((r) => seen.has(Number(r.CUST_ID)))).toBe(false);
  });

  describe("a cursor of another list or caller, or altered, is INVALID_CURSOR", () => {
    let cursor: string;
    const invalid = (res: GraphQLReply) => {
      expect(res.body.errors?.[0]?.extensions).toMatchObject({ code: "INVALID_CURSOR", status: 400 });
      expect(res.body.data?.CUST ?? null).toBeNull();
    };

    beforeAll(async () => {
      const res = await anna(PAGE, { first: 3, order: [{ NAME: "asc" }], where: { VIP: { _eq: true } } });
      cursor = res.body.data.CUST.meta.end_cursor;
      expect(typeof cursor).toBe("string");
      // The cursor works for its own list.
      const ok = await anna(PAGE, {
        first: 3,
        after: cursor,
        order: [{ NAME: "asc" }],
        where: { VIP: { _eq: true } },
      });
      expect(ok.body.errors).toBeUndefined();
    });

    it("another sort", async () => {
      invalid(
        await anna(PAGE, {
          first: 3,
          after: cursor,
          order: [{ NAME: "desc" }],
          where: { VIP: { _eq: true } },
        }),
      );
      invalid(await anna(PAGE, { first: 3, after: cursor, where: { VIP: { _eq: true } } }));
    });

    it("another filter", async () => {
      invalid(
        await anna(PAGE, {
          first: 3,
          after: cursor,
          order: [{ NAME: "asc" }],
          where: { VIP: { _eq: false } },
        }),
      );
      invalid(await anna(PAGE, { first: 3, after: cursor, order: [{ NAME: "asc" }] }));
    });

    it("another dimension", async () => {
      const res = await anna(
        `query ($after: String) { CITY(source: "anag-3", first: 2, after: $after) { data { CITY_ID } } }`,
        {
          after: cursor,
        },
      );
      expect(res.body.errors?.[0]?.extensions).toMatchObject({ code: "INVALID_CURSOR", status: 400 });
    });

    it("another user", async () => {
      // The same page without CREDIT_LIMIT, which lucia's peso takes out of her schema.
      invalid(
        await lucia(PAGE.replace(" CREDIT_LIMIT", ""), {
          first: 3,
          after: cursor,
          order: [{ NAME: "asc" }],
          where: { VIP: { _eq: true } },
        }),
      );
    });

    it("altered: any byte changed (version, iv, ciphertext, tag), a readable payload, not a cursor at all", async () => {
      const variables = { first: 3, order: [{ NAME: "asc" }], where: { VIP: { _eq: true } } };
      const bytes = Buffer.from(cursor, "base64url");
      for (const at of [0, 1, 13, bytes.length - 1]) {
        const changed = Buffer.from(bytes);
        changed[at]! ^= 1;
        invalid(await anna(PAGE, { ...variables, after: changed.toString("base64url") }));
      }
      // The former format (readable values beside an HMAC) is no cursor.
      const readable = { v: ["Alpha", BASE_ID], s: Buffer.alloc(16).toString("base64url") };
      invalid(
        await anna(PAGE, {
          ...variables,
          after: Buffer.from(JSON.stringify(readable)).toString("base64url"),
        }),
      );
      invalid(await anna(PAGE, { ...variables, after: `${cursor.slice(0, -2)}AA` }));
      invalid(await anna(PAGE, { ...variables, after: "not a cursor" }));
      invalid(await anna(PAGE, { ...variables, after: "x".repeat(5000) }));
    });
  });

  it("a cursor shows no value of its sort keys: a field searchable but not listed (EMAIL: R, no L) stays hidden", async () => {
    const hidden = await t.services.db.query<{ EMAIL: string }>(
      `SELECT "EMAIL" FROM "TB_ANAG_CUST00" WHERE "TENANT_ID" = 'acme' AND "EMAIL" IS NOT NULL`,
    );
    expect(hidden.rows.length).toBeGreaterThan(0);
    const order = [{ EMAIL: "desc" }];
    const res = await anna(
      `query ($order: [CUST_order_by!]) {
        CUST(source: "anag-1", order_by: $order, first: 1) { data { CUST_ID EMAIL } meta { end_cursor } }
      }`,
      { order },
    );
    // The list hides EMAIL (spec graphql.md: "never data")…
    expect(res.body.errors?.[0]?.extensions).toMatchObject({ code: "FIELD_NOT_VISIBLE" });
    expect(res.body.data.CUST.data[0].EMAIL).toBeNull();
    // …and so does its cursor, in any reading of its bytes.
    const cursor: string = res.body.data.CUST.meta.end_cursor;
    const bytes = Buffer.from(cursor, "base64url");
    for (const text of [bytes.toString("utf8"), bytes.toString("latin1"), cursor]) {
      for (const { EMAIL } of hidden.rows) {
        expect(text).not.toContain(EMAIL);
        expect(text).not.toContain(EMAIL.split("@")[0]);
      }
    }
    // The sort still pages: the walk is the whole list in the same order.
    const full = await all({ order });
    const pages = await walk(4, { order });
    expect(ids(pages.flat())).toEqual(ids(full));
  });

  it("first: 0, or after with limit: 0, is INVALID_PARAMETER: a cursor page holds at least one row", async () => {
    // Else a page of no rows says has_more with no end_cursor to go on from.
    // Both bounds in one message: from 1 (it said "from 0" for a first past 1000).
    for (const first of [0, -1, 1001]) {
      const res = await anna(PAGE, { first });
      expect(res.body.errors?.[0]?.extensions).toMatchObject({
        code: "INVALID_PARAMETER",
        field: "first",
        status: 400,
      });
      expect(res.body.errors[0].message).toBe(`first must be a whole number from 1 to 1000; got ${first}.`);
      expect(res.body.data?.CUST ?? null).toBeNull();
    }
    const page = await anna(PAGE, { first: 2 });
    const after = page.body.data.CUST.meta.end_cursor;
    const zero = await anna(
      `query ($after: String) { CUST(source: "anag-1", after: $after, limit: 0) { data { CUST_ID } meta { has_more end_cursor } } }`,
      { after },
    );
    expect(zero.body.errors?.[0]?.extensions).toMatchObject({ code: "INVALID_PARAMETER", field: "limit" });
    // after with a limit of at least one pages as first does; limit: 0 alone still reads meta only.
    const one = await anna(
      `query ($after: String) { CUST(source: "anag-1", after: $after, limit: 1) { data { CUST_ID } } }`,
      { after },
    );
    expect(one.body.errors).toBeUndefined();
    expect(one.body.data.CUST.data).toHaveLength(1);
    const metaOnly = await anna(
      `{ CUST(source: "anag-1", limit: 0) { data { CUST_ID } meta { has_more } } }`,
    );
    expect(metaOnly.body.errors).toBeUndefined();
    expect(metaOnly.body.data.CUST).toEqual({ data: [], meta: { has_more: true } });
  });

  it("first with limit, or first/after with offset, is INVALID_PARAMETER", async () => {
    const both = await anna(`{ CUST(source: "anag-1", first: 2, limit: 2) { data { CUST_ID } } }`);
    expect(both.body.errors[0].extensions).toMatchObject({
      code: "INVALID_PARAMETER",
      field: "first",
      status: 400,
    });
    const offset = await anna(`{ CUST(source: "anag-1", first: 2, offset: 2) { data { CUST_ID } } }`);
    expect(offset.body.errors[0].extensions).toMatchObject({ code: "INVALID_PARAMETER", field: "offset" });
    const big = await anna(`{ CUST(source: "anag-1", first: 1001) { data { CUST_ID } } }`);
    expect(big.body.errors[0].extensions).toMatchObject({ code: "INVALID_PARAMETER", field: "first" });
  });
});

describe("the keyset in the page's SQL", () => {
  const model = sampleModel();
  const dim = authorizedDimension(model, "CUST");
  const plan = (sort: Array<{ field: string; direction: "asc" | "desc" }>, after: unknown[]) => {
    const p = planList(
      handContext({ source: "anag-1" }),
      model,
      dim,
      emptyListQuery({ sort, numRows: 5, keyset: { after: after as never } }),
    );
    if (p.kind !== "records") throw new Error("a records plan");
    return p;
  };

  it("the default order: one comparison on the id, bound as a parameter", () => {
    const q = compileRecordsSelect(plan([], [41]), true);
    expect(q.text).toContain(
      `WHERE t."TENANT_ID" = $1 AND t."TREC" <> 'C' AND t."CUST_ID" > $2\nORDER BY t."CUST_ID" ASC`,
    );
    expect(q.params).toEqual(["acme", 41, 5, 0]);
  });

  it("a NOT NULL key with the id, one way: a row comparison", () => {
    const q = compileRecordsSelect(plan([{ field: "NAME", direction: "asc" }], ["Beta", 7]), true);
    expect(q.text).toContain(
      `AND (t."NAME", t."CUST_ID") > ($2, $3)\nORDER BY t."NAME" ASC, t."CUST_ID" ASC`,
    );
    expect(q.params.slice(1, 3)).toEqual(["Beta", 7]);
  });

  it("a NOT NULL key descending (the id ascending): a range bound on the key and the OR-chain", () => {
    const q = compileRecordsSelect(plan([{ field: "NAME", direction: "desc" }], ["Beta", 7]), true);
    expect(q.text).toContain(
      `AND t."NAME" <= $2 AND (t."NAME" < $2 OR (t."NAME" = $2 AND t."CUST_ID" > $3))\nORDER BY t."NAME" DESC, t."CUST_ID" ASC`,
    );
  });

  it("mixed directions with nullable keys: the OR-chain, NULLs last; a NULL cursor value compares IS NULL", () => {
    const sort = [
      { field: "VIP", direction: "desc" as const },
      { field: "CREDIT_LIMIT", direction: "asc" as const },
    ];
    const q = compileRecordsSelect(plan(sort, [true, "250", 9]), true);
    expect(q.text).toContain(
      `AND ((t."VIP" < $2 OR t."VIP" IS NULL) OR (t."VIP" = $2 AND (t."CREDIT_LIMIT" > $3 OR t."CREDIT_LIMIT" IS NULL)) OR (t."VIP" = $2 AND t."CREDIT_LIMIT" = $3 AND t."CUST_ID" > $4))`,
    );
    expect(q.params.slice(1, 4)).toEqual([true, 250, 9]);
    const nulls = compileRecordsSelect(plan(sort, [null, null, 9]), true);
    expect(nulls.text).toContain(`AND ((t."VIP" IS NULL AND t."CREDIT_LIMIT" IS NULL AND t."CUST_ID" > $2))`);
  });

  it("the page with its total: the keyset narrows the page, not the count", () => {
    const q = compileRecordsPage(plan([], [41]), 10_000);
    expect(q.text).toContain(`AND t."TREC" <> 'C' AND t."CUST_ID" > $2\nORDER BY t."CUST_ID" ASC`);
    expect(q.text).toMatch(
      /SELECT \(SELECT count\(\*\) FROM \(SELECT 1 FROM "TB_ANAG_CUST00" AS t\nWHERE t\."TENANT_ID" = \$1 AND t\."TREC" <> 'C'\nLIMIT \$5\)/,
    );
  });

  it("a cursor value its field cannot have, or of the wrong length, is INVALID_CURSOR", () => {
    expect(() => plan([], ["x"])).toThrow(expect.objectContaining({ code: "INVALID_CURSOR" }));
    expect(() => plan([], [1, 2])).toThrow(expect.objectContaining({ code: "INVALID_CURSOR" }));
    expect(() => plan([], [null])).toThrow(expect.objectContaining({ code: "INVALID_CURSOR" }));
  });
});

describe("the cursor codec", () => {
  const scope: CursorScope = {
    dim: "CUST",
    source: "anag-1",
    centerDett: null,
    tenantId: "acme",
    userId: "anna",
    sort: [{ field: "EMAIL", direction: "desc" }],
    filter: null,
    search: null,
    condTrec: null,
  };
  const secret = new TextEncoder().encode("a".repeat(48));

  it("encrypts: the values come back only through the key of the same secret and the same list", () => {
    const cursor = cursorCodec(secret).encode(scope, ["secret-buyer@yirga.example", 2]);
    expect(Buffer.from(cursor, "base64url").toString("latin1")).not.toContain("secret-buyer");
    // Another process of the deployment (the same secret) reads it.
    expect(cursorCodec(secret).decode({ ...scope }, cursor)).toEqual(["secret-buyer@yirga.example", 2]);
    const refused = expect.objectContaining({ code: "INVALID_CURSOR" });
    expect(() => cursorCodec(new TextEncoder().encode("b".repeat(48))).decode(scope, cursor)).toThrow(
      refused,
    );
    expect(() => cursorCodec(secret).decode({ ...scope, userId: "lucia" }, cursor)).toThrow(refused);
  });

  it("the same row of the same list gives the same cursor; a value's length is hidden within 32 bytes", () => {
    const codec = cursorCodec(secret);
    expect(codec.encode(scope, ["x@y", 2])).toBe(codec.encode(scope, ["x@y", 2]));
    expect(codec.encode(scope, ["x@y", 2])).not.toBe(codec.encode(scope, ["x@y", 3]));
    expect(codec.encode(scope, ["x@y", 2]).length).toBe(
      codec.encode(scope, ["longer.name@y.example", 2]).length,
    );
  });
});
