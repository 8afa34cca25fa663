// Row scope against an oracle (issue 37): random users with random units, environments, all_rows
// and ROW_FILTERs (two grants each, so the union of grants is exercised) read a random set of
// customers through every read path; each answer must hold exactly the rows an in-memory
// evaluation of the rules allows, and an out-of-scope record must be indistinguishable from one
// that does not exist. The seed is fixed (and printed on failure) so a failure replays.
import { readFile } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loginAs } from "../helpers/auth.ts";
import { BACKENDS, createTestApp, SAMPLE_FIXTURE, type TestApp } from "../helpers/env.ts";
import { type Client, client, NO_RATE_LIMITS } from "../write/http.ts";

const SEED = 20261127;

/** A small deterministic generator (mulberry32). */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Customer {
  NAME: string;
  CITY_ID: string;
  CREDIT_LIMIT: number;
  VIP: boolean;
  CENTRO_DETT: string | null;
  AMBIENTE: string | null;
}

/** ROW_FILTERs with their meaning, as the oracle evaluates them. */
const FILTERS: Array<{ text: string; holds: (c: Customer, user: string) => boolean }> = [
  { text: "VIP eq true", holds: (c) => c.VIP },
  { text: "CREDIT_LIMIT gt 5000", holds: (c) => c.CREDIT_LIMIT > 5000 },
  {
    text: "CITY_ID eq 'MI' or CREDIT_LIMIT le 2000",
    holds: (c) => c.CITY_ID === "MI" || c.CREDIT_LIMIT <= 2000,
  },
  { text: "not (VIP eq true) and CITY_ID ne 'RM'", holds: (c) => !c.VIP && c.CITY_ID !== "RM" },
  { text: "startwith(NAME, 'C1')", holds: (c) => c.NAME.startsWith("C1") },
];

interface Grant {
  COD_MENU: string;
  OPERATIONS: string[];
  LEVEL: number;
  ROW_FILTER?: string;
}
interface User {
  id: string;
  centro: string | null;
  ambiente: string | null;
  grants: Grant[];
  /** Per grant: whether it lifts the unit scope, and its filter's index (-1: none). */
  rules: Array<{ allRows: boolean; filter: number }>;
}

function world(rand: () => number) {
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(rand() * xs.length)]!;
  const units = ["U1", "U2", "U3", null];
  const envs = ["prod", "test", null];
  const customers: Customer[] = Array.from({ length: 36 }, (_, i) => ({
    NAME: `C${i}`,
    CITY_ID: pick(["MI", "RM", "TO"]),
    CREDIT_LIMIT: Math.floor(rand() * 10_000),
    VIP: rand() < 0.4,
    CENTRO_DETT: pick(units),
    AMBIENTE: pick(envs),
  }));
  const users: User[] = Array.from({ length: 8 }, (_, i) => {
    // Both grants cover anag-1: one on the node itself, one on its parent.
    const rules = ["anag-1", "anag"].map(() => ({
      allRows: rand() < 0.2,
      filter: rand() < 0.6 ? Math.floor(rand() * FILTERS.length) : -1,
    }));
    return {
      id: `oracle${i}`,
      centro: pick(units),
      ambiente: pick(envs),
      rules,
      grants: ["anag-1", "anag"].map((node, j) => ({
        COD_MENU: node,
        OPERATIONS: rules[j]!.allRows ? ["read", "all_rows"] : ["read"],
        LEVEL: 1,
        ...(rules[j]!.filter >= 0 ? { ROW_FILTER: FILTERS[rules[j]!.filter]!.text } : {}),
      })),
    };
  });
  return { customers, users };
}

/** The oracle: the rows a user may see. */
function visible(user: User, c: Customer): boolean {
  return user.rules.some(
    (r) =>
      (r.allRows || (c.CENTRO_DETT === user.centro && c.AMBIENTE === user.ambiente)) &&
      (r.filter < 0 || FILTERS[r.filter]!.holds(c, user.id)),
  );
}

describe.each(BACKENDS)("row scope oracle (%s)", (backend) => {
  const { customers, users } = world(random(SEED));
  let t: TestApp;
  const clients = new Map<string, Client>();
  const ids = new Map<string, number>();

  beforeAll(async () => {
    const f = JSON.parse(await readFile(SAMPLE_FIXTURE, "utf8")) as {
      TB_DIM: Array<Record<string, unknown>>;
      users: unknown[];
      records: Record<string, unknown[]>;
    };
    f.TB_DIM = f.TB_DIM.map((d) => (d.COD_DIM === "CUST" ? { ...d, ROW_SCOPE: "centro_dett,ambiente" } : d));
    f.users = [
      ...f.users,
      ...users.map((u) => ({
        user_id: u.id,
        password: `${u.id}-secret`,
        tenant_id: "acme",
        peso: "3",
        centro_dett: u.centro,
        ambiente: u.ambiente,
        grants: [...u.grants, { COD_MENU: "sales", OPERATIONS: ["read"], LEVEL: 1 }],
      })),
    ];
    f.records = {
      ...f.records,
      CUST: customers.map((data) => ({ tenant_id: "acme", data })),
      ORD: customers.map((_, i) => ({
        tenant_id: "acme",
        data: { CUST_ID: i + 1, ORD_DATE: "20261102", TOTAL: i },
      })),
    };
    t = await createTestApp(backend, { fixture: f, env: NO_RATE_LIMITS });
    const { rows } = await t.services.db.query<{ CUST_ID: number; NAME: string }>(
      `SELECT "CUST_ID", "NAME" FROM "TB_ANAG_CUST00" WHERE "TENANT_ID" = 'acme'`,
    );
    for (const r of rows) ids.set(r.NAME, Number(r.CUST_ID));
    for (const u of users) clients.set(u.id, client(t.app, await loginAs(t.app, u.id, `${u.id}-secret`)));
  }, 180_000);
  afterAll(async () => {
    await t?.close();
  });

  const expected = (u: User) =>
    customers
      .filter((c) => visible(u, c))
      .map((c) => c.NAME)
      .sort();

  it("the world is not trivial: some users see some rows, none sees them all without all_rows", () => {
    const counts = users.map((u) => expected(u).length);
    expect(counts.some((n) => n > 0)).toBe(true);
    expect(counts.some((n) => n < customers.length)).toBe(true);
  });

  it(`lists, totals, counts and groups hold exactly the oracle's rows (seed ${SEED})`, async () => {
    for (const u of users) {
      const c = clients.get(u.id)!;
      const want = expected(u);
      const list = await c.get("/api/v4/core/CUST?source=anag-1&$num_rows=1000&$fields=NAME");
      expect(list.status, u.id).toBe(200);
      const body = list.body as { data: Array<{ NAME: string }>; meta: { total: number } };
      expect(body.data.map((r) => r.NAME).sort(), u.id).toEqual(want);
      expect(body.meta.total, u.id).toBe(want.length);
      const count = await c.get("/api/v4/core/CUST/count?source=anag-1");
      expect((count.body as { count: number }).count, u.id).toBe(want.length);
      const grouped = await c.get("/api/v4/core/CUST?source=anag-1&$group=CITY_ID");
      const groups = (grouped.body as { data: Array<{ CITY_ID: string; COUNT: number }> }).data;
      const byCity = new Map<string, number>();
      for (const cu of customers.filter((x) => visible(u, x)))
        byCity.set(cu.CITY_ID, (byCity.get(cu.CITY_ID) ?? 0) + 1);
      expect(Object.fromEntries(groups.map((g) => [g.CITY_ID, Number(g.COUNT)])), u.id).toEqual(
        Object.fromEntries(byCity),
      );
    }
  });

  it("GraphQL lists and the expanded relation from orders agree with the oracle", async () => {
    for (const u of users) {
      const c = clients.get(u.id)!;
      const want = new Set(expected(u));
      const res = await c.post("/graphql", {
        query: `{ CUST(source: "anag-1", limit: 1000) { data { NAME } meta { total } }
                  ORD(source: "sales-1", limit: 1000) { data { TOTAL CUST { NAME } } } }`,
      });
      expect(res.status, u.id).toBe(200);
      const data = (
        res.body as {
          data: {
            CUST: { data: Array<{ NAME: string }>; meta: { total: number } };
            ORD: { data: Array<{ TOTAL: unknown; CUST: { NAME: string } | null }> };
          };
        }
      ).data;
      expect(data.CUST.data.map((r) => r.NAME).sort(), u.id).toEqual([...want].sort());
      expect(data.CUST.meta.total, u.id).toBe(want.size);
      for (const o of data.ORD.data) {
        const name = `C${Number(o.TOTAL)}`;
        expect(o.CUST?.NAME ?? null, `${u.id} order of ${name}`).toBe(want.has(name) ? name : null);
      }
      const rest = await c.get("/api/v4/core/ORD?source=sales-1&$num_rows=1000&$expand=CUST");
      for (const o of (rest.body as { data: Array<{ TOTAL: unknown; CUST: { NAME: string } | null }> })
        .data) {
        const name = `C${Number(o.TOTAL)}`;
        expect(o.CUST?.NAME ?? null, `${u.id} $expand of ${name}`).toBe(want.has(name) ? name : null);
      }
    }
  });

  it("by id: a visible record is 200; out of scope answers exactly as a record that does not exist", async () => {
    const missing = 9_999_999;
    for (const u of users) {
      const c = clients.get(u.id)!;
      const want = new Set(expected(u));
      const none = await c.get(`/api/v4/core/CUST/${missing}?source=anag-1`);
      expect(none.status).toBe(404);
      for (const cu of customers.slice(0, 12)) {
        const id = ids.get(cu.NAME)!;
        const res = await c.get(`/api/v4/core/CUST/${id}?source=anag-1`);
        if (want.has(cu.NAME)) {
          expect(res.status, `${u.id} ${cu.NAME}`).toBe(200);
        } else {
          expect(res.status, `${u.id} ${cu.NAME}`).toBe(404);
          const shape = (body: unknown, n: number) =>
            JSON.stringify(body).replaceAll(new RegExp(`\\b${n}\\b`, "g"), "#");
          expect(shape(res.body, id), `${u.id} ${cu.NAME}`).toBe(shape(none.body, missing));
          expect(res.body, `${u.id} ${cu.NAME}`).toMatchObject({ status: 404, code: "RECORD_NOT_FOUND" });
        }
      }
    }
  });
});
