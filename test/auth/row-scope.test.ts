// Row scope (decisions.md §17, issue 37): TB_DIM.ROW_SCOPE and a grant's ROW_FILTER restrict every
// read and write, REST and GraphQL alike; a row out of scope behaves as a row of another tenant.
// The fixture is the sample's, with CUST scoped by centro_dett and seeded in two units.
import { readFile } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadUserGrants } from "../../src/auth/profile.ts";
import { ApiError } from "../../src/errors.ts";
import { checkFixture } from "../../src/fixtures/import.ts";
import type { ReceivedEvent } from "../../src/events/bus.ts";
import { startEventRuntime } from "../../src/events/runtime.ts";
import { createWebhookDispatcher } from "../../src/events/webhooks/dispatcher.ts";
import { authorizeUpload } from "../../src/resolvers/media.ts";
import { subscribeToEvents } from "../../src/resolvers/read/events.ts";
import type { RequestContext } from "../../src/types.ts";
import { loginAs } from "../helpers/auth.ts";
import { BACKENDS, createTestApp, SAMPLE_FIXTURE, type TestApp } from "../helpers/env.ts";
import { type Client, client, NO_RATE_LIMITS } from "../write/http.ts";

type Fixture = Record<string, unknown> & {
  TB_DIM: Array<Record<string, unknown>>;
  users: Array<Record<string, unknown>>;
  records: Record<string, Array<{ tenant_id: string; data: Record<string, unknown> }>>;
};

/** Customers by unit: the oracle the reads are checked against. */
const CUSTOMERS = [
  { NAME: "Milano Uno", CITY_ID: "MI", CREDIT_LIMIT: 1000, VIP: true, CENTRO_DETT: "MI01" },
  { NAME: "Milano Due", CITY_ID: "MI", CREDIT_LIMIT: 2000, VIP: false, CENTRO_DETT: "MI01" },
  { NAME: "Milano Tre", CITY_ID: "RM", CREDIT_LIMIT: 3000, VIP: true, CENTRO_DETT: "MI01" },
  { NAME: "Roma Uno", CITY_ID: "RM", CREDIT_LIMIT: 4000, VIP: true, CENTRO_DETT: "RM01" },
  { NAME: "Roma Due", CITY_ID: "RM", CREDIT_LIMIT: 5000, VIP: false, CENTRO_DETT: "RM01" },
  { NAME: "Sede", CITY_ID: "MI", CREDIT_LIMIT: 6000, VIP: false, CENTRO_DETT: "HQ" },
];

const ANAG_RW = { COD_MENU: "anag", OPERATIONS: ["read", "write"], LEVEL: 3 };
const SALES_RW = { COD_MENU: "sales", OPERATIONS: ["read", "write"], LEVEL: 3 };
const user = (id: string, centro: string, grants: unknown[]) => ({
  user_id: id,
  password: `${id}-secret-1`,
  tenant_id: "acme",
  peso: "2",
  centro_dett: centro,
  ambiente: "production",
  grants,
});

async function scopedFixture(): Promise<Fixture> {
  const f = JSON.parse(await readFile(SAMPLE_FIXTURE, "utf8")) as Fixture;
  f.TB_DIM = f.TB_DIM.map((d) => (d.COD_DIM === "CUST" ? { ...d, ROW_SCOPE: "centro_dett" } : d));
  f.users = [
    ...f.users,
    user("mi", "MI01", [ANAG_RW, SALES_RW]),
    user("rm", "RM01", [ANAG_RW, SALES_RW]),
    user("boss", "HQ", [{ ...ANAG_RW, OPERATIONS: ["read", "write", "all_rows"] }, SALES_RW]),
    user("vipmi", "MI01", [{ ...ANAG_RW, ROW_FILTER: "VIP eq true" }, SALES_RW]),
    user("admmi", "MI01", [{ ...ANAG_RW, LEVEL: 4 }]),
    { ...user("multi", "MI01", [ANAG_RW]), centri: ["RM01"] },
    // A filter whose placeholder the caller's value cannot fill (a user id for an INTEGER): no row.
    user("norows", "MI01", [{ ...ANAG_RW, ROW_FILTER: "RISK_SCORE eq '{user}'" }]),
    user("mine", "MI01", [
      { ...ANAG_RW, OPERATIONS: ["read", "write", "all_rows"], ROW_FILTER: "SALES_REP eq '{user}'" },
    ]),
  ];
  f.records = {
    ...f.records,
    CUST: CUSTOMERS.map((data) => ({ tenant_id: "acme", data })),
    // Orders of customers 1 (MI01) and 4 (RM01).
    ORD: [
      { tenant_id: "acme", data: { CUST_ID: 1, ORD_DATE: "20261102", TOTAL: 10 } },
      { tenant_id: "acme", data: { CUST_ID: 4, ORD_DATE: "20261103", TOTAL: 20 } },
    ],
  };
  return f;
}

describe.each(BACKENDS)("row scope (%s)", (backend) => {
  let t: TestApp;
  const as: Record<string, Client> = {};

  beforeAll(async () => {
    t = await createTestApp(backend, { fixture: await scopedFixture(), env: NO_RATE_LIMITS });
    for (const name of ["mi", "rm", "boss", "vipmi", "mine", "admmi", "norows"])
      as[name] = client(t.app, await loginAs(t.app, name, `${name}-secret-1`));
  }, 120_000);
  afterAll(async () => {
    await t?.close();
  });

  const names = async (c: Client, url: string) => {
    const res = await c.get(url);
    expect(res.status).toBe(200);
    return (res.body as { data: Array<{ NAME: string }> }).data.map((r) => r.NAME).sort();
  };
  const idOf = async (name: string) => {
    const { rows } = await t.services.db.query<{ CUST_ID: number }>(
      `SELECT "CUST_ID" FROM "TB_ANAG_CUST00" WHERE "TENANT_ID" = 'acme' AND "NAME" = $1`,
      [name],
    );
    return Number(rows[0]!.CUST_ID);
  };
  /** A user's request context on anag-1, as the protected scope makes it (resolvers called directly). */
  const contextOf = async (userId: string, centro: string): Promise<RequestContext> => ({
    principal: {
      userId,
      tenantId: "acme",
      sessionId: "t",
      peso: 2,
      centroDett: centro,
      ambiente: "production",
      lingua: null,
      grants: await loadUserGrants(t.services.db, userId),
    },
    source: "anag-1",
    centerDett: centro,
    requestId: "t",
    now: () => new Date(),
  });
  const inUnit = (unit: string) =>
    CUSTOMERS.filter((c) => c.CENTRO_DETT === unit)
      .map((c) => c.NAME)
      .sort();

  it("the DDL sync makes the scope column and its index", async () => {
    const { rows } = await t.services.db.query<{ indexdef: string }>(
      `SELECT indexdef FROM pg_indexes WHERE tablename = 'TB_ANAG_CUST00' AND indexdef LIKE '%CENTRO_DETT%'`,
    );
    expect(rows.length).toBe(1);
    expect(rows[0]!.indexdef).toMatch(/"TENANT_ID", "CENTRO_DETT", "CUST_ID"/);
  });

  it("lists, counts and groups show only the caller's unit; all_rows lifts it", async () => {
    expect(await names(as.mi!, "/api/v4/core/CUST?source=anag-1")).toEqual(inUnit("MI01"));
    expect(await names(as.rm!, "/api/v4/core/CUST?source=anag-1")).toEqual(inUnit("RM01"));
    expect(await names(as.boss!, "/api/v4/core/CUST?source=anag-1")).toEqual(
      CUSTOMERS.map((c) => c.NAME).sort(),
    );
    const list = await as.mi!.get("/api/v4/core/CUST?source=anag-1");
    expect((list.body as { meta: { total: number } }).meta.total).toBe(3);
    const count = await as.rm!.get("/api/v4/core/CUST/count?source=anag-1");
    expect(count.status).toBe(200);
    expect((count.body as { count: number }).count).toBe(2);
    // The scope is the caller's right, not the request's filter: filters_applied does not show it.
    expect(JSON.stringify(count.body)).not.toContain("CENTRO_DETT");
    const grouped = await as.mi!.get(
      "/api/v4/core/CUST?source=anag-1&$group=VIP&aggregate=SUM(CREDIT_LIMIT)",
    );
    expect(grouped.status).toBe(200);
    const groups = (grouped.body as { data: Array<{ VIP: boolean; SUM_CREDIT_LIMIT: unknown }> }).data;
    expect(groups.map((g) => [g.VIP, Number(g.SUM_CREDIT_LIMIT)]).sort()).toEqual([
      [false, 2000],
      [true, 4000],
    ]);
  });

  it("a record out of scope is 404 by id, exactly as one that does not exist", async () => {
    const roma = await idOf("Roma Uno");
    const out = await as.mi!.get(`/api/v4/core/CUST/${roma}?source=anag-1`);
    const none = await as.mi!.get(`/api/v4/core/CUST/999999?source=anag-1`);
    expect(out.status).toBe(404);
    expect(none.status).toBe(404);
    const shape = (b: unknown) => JSON.stringify(b).replaceAll(String(roma), "#").replaceAll("999999", "#");
    expect(shape(out.body)).toBe(shape(none.body));
    expect((await as.rm!.get(`/api/v4/core/CUST/${roma}?source=anag-1`)).status).toBe(200);
    const history = await as.mi!.get(`/api/v4/core/CUST/${roma}/history?source=anag-1`);
    expect(history.status).toBe(404);
  });

  it("an expanded relation and a GraphQL relation to an out-of-scope target are null", async () => {
    const res = await as.mi!.get("/api/v4/core/ORD?source=sales-1&$expand=CUST&sort=TOTAL");
    expect(res.status).toBe(200);
    const orders = (res.body as { data: Array<{ TOTAL: unknown; CUST: { NAME: string } | null }> }).data;
    expect(orders.map((o) => [Number(o.TOTAL), o.CUST?.NAME ?? null])).toEqual([
      [10, "Milano Uno"],
      [20, null],
    ]);
    const gql = await as.mi!.post("/graphql", {
      query: `{ ORD(source: "sales-1", order_by: [{TOTAL: asc}]) { data { TOTAL CUST { NAME } } }
                CUST(source: "anag-1", order_by: [{NAME: asc}]) { data { NAME } meta { total } } }`,
    });
    expect(gql.status).toBe(200);
    const data = (gql.body as { data: Record<string, { data: unknown[]; meta?: { total: number } }> }).data;
    expect(data.ORD!.data).toEqual([
      { TOTAL: expect.anything(), CUST: { NAME: "Milano Uno" } },
      { TOTAL: expect.anything(), CUST: null },
    ]);
    expect(data.CUST!.data).toEqual(inUnit("MI01").map((NAME) => ({ NAME })));
    expect(data.CUST!.meta!.total).toBe(3);
    // From the other side: a reverse relation lists only in-scope children (ORD is unscoped here).
    const cities = await as.rm!.post("/graphql", {
      query: `{ CITY(source: "anag-3", where: {CITY_ID: {_eq: "MI"}}) { data { CUST { NAME } } } }`,
    });
    const items = (cities.body as { data: { CITY: { data: Array<{ CUST: Array<{ NAME: string }> }> } } }).data
      .CITY.data;
    expect(items[0]!.CUST).toEqual([]);
  });

  it("lookups offer only in-scope targets", async () => {
    const res = await as.rm!.get("/api/v4/core/vars?source=sales-1&field=CUST_ID&getACList=1");
    expect(res.status).toBe(200);
    const listed = JSON.stringify(res.body);
    expect(listed).toContain(String(await idOf("Roma Uno")));
    const ids = (res.body as Array<{ CUST_ID: number }>).map((r) => Number(r.CUST_ID)).sort();
    expect(ids).toEqual([await idOf("Roma Due"), await idOf("Roma Uno")].sort());
  });

  it("a create stamps the caller's unit, whatever the data says", async () => {
    const res = await as.mi!.post("/api/v4/core/CUST?source=anag-1", {
      data: { NAME: "Nuovo Milano", CITY_ID: "MI", CENTRO_DETT: "RM01" },
    });
    expect(res.status).toBe(201);
    const { rows } = await t.services.db.query<{ CENTRO_DETT: string }>(
      `SELECT "CENTRO_DETT" FROM "TB_ANAG_CUST00" WHERE "NAME" = 'Nuovo Milano'`,
    );
    expect(rows).toEqual([{ CENTRO_DETT: "MI01" }]);
    expect(await names(as.rm!, "/api/v4/core/CUST?source=anag-1")).not.toContain("Nuovo Milano");
  });

  it("updates and deletes reach only in-scope rows: 404 and nothing changed otherwise", async () => {
    const roma = await idOf("Roma Due");
    const patch = await as.mi!.patch(`/api/v4/core/CUST/${roma}?source=anag-1`, { data: { NAME: "Hacked" } });
    expect(patch.status).toBe(404);
    const del = await as.mi!.delete(`/api/v4/core/CUST/${roma}?source=anag-1`);
    expect(del.status).toBe(404);
    const { rows } = await t.services.db.query<{ NAME: string; TREC: string }>(
      `SELECT "NAME", "TREC" FROM "TB_ANAG_CUST00" WHERE "CUST_ID" = $1`,
      [roma],
    );
    expect(rows).toEqual([{ NAME: "Roma Due", TREC: expect.not.stringMatching(/^C$/) }]);
    const own = await as.rm!.patch(`/api/v4/core/CUST/${roma}?source=anag-1`, { data: { NOTES: "ok" } });
    expect(own.status).toBe(200);
  });

  it("a foreign key to an out-of-scope record is refused as one to another tenant's, and nothing is written", async () => {
    const roma = await idOf("Roma Uno");
    const milano = await idOf("Milano Uno");
    const count = async () =>
      Number(
        (await t.services.db.query<{ n: string }>(`SELECT count(*) AS n FROM "TB_DOC_ORD00"`)).rows[0]!.n,
      );
    const before = await count();
    const out = await as.mi!.post("/api/v4/core/ORD?source=sales-1", { data: { CUST_ID: roma } });
    expect(out.status).toBe(400);
    expect(out.body).toMatchObject({ code: "INVALID_FOREIGN_KEY", field: "CUST_ID" });
    // The same answer as for an id that names no customer at all: nothing tells them apart.
    const none = await as.mi!.post("/api/v4/core/ORD?source=sales-1", { data: { CUST_ID: 999999 } });
    expect(none.body.code).toBe(out.body.code);
    // A grant's ROW_FILTER narrows what a key may name too (Milano Due is not VIP).
    const notVip = await as.vipmi!.post("/api/v4/core/ORD?source=sales-1", {
      data: { CUST_ID: await idOf("Milano Due") },
    });
    expect(notVip.body).toMatchObject({ code: "INVALID_FOREIGN_KEY", field: "CUST_ID" });
    expect(await count()).toBe(before);
    // In scope it is written; all_rows names any unit's.
    expect((await as.mi!.post("/api/v4/core/ORD?source=sales-1", { data: { CUST_ID: milano } })).status).toBe(
      201,
    );
    expect((await as.boss!.post("/api/v4/core/ORD?source=sales-1", { data: { CUST_ID: roma } })).status).toBe(
      201,
    );
  });

  it("ROW_FILTER narrows reads and refuses writes whose row would not match (403 ROW_NOT_ALLOWED)", async () => {
    const vipMilano = CUSTOMERS.filter((c) => c.CENTRO_DETT === "MI01" && c.VIP)
      .map((c) => c.NAME)
      .sort();
    expect(await names(as.vipmi!, "/api/v4/core/CUST?source=anag-1")).toEqual(vipMilano);
    const outboxBefore = await t.services.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM "TB_ANAG_OUTBOX00"`,
    );
    const refused = await as.vipmi!.post("/api/v4/core/CUST?source=anag-1", {
      data: { NAME: "Non VIP", CITY_ID: "MI", VIP: false },
    });
    expect(refused.status).toBe(403);
    // The message says which fields of the record fall outside and what the caller's grants allow
    // there (the caller's own unit and filter), and what to do.
    expect(refused.body).toMatchObject({
      code: "ROW_NOT_ALLOWED",
      status: 403,
      message: expect.stringContaining(
        "The CUST record as written (CENTRO_DETT 'MI01', VIP false) is outside the rows your grants let you write: CENTRO_DETT eq 'MI01' and VIP eq true.",
      ),
      details: { dimension: "CUST", written: { CENTRO_DETT: "MI01", VIP: false } },
    });
    expect((refused.body as { message: string }).message).toMatch(
      /ask for a grant on this dimension with all_rows/,
    );
    const uno = await idOf("Milano Uno");
    const demote = await as.vipmi!.patch(`/api/v4/core/CUST/${uno}?source=anag-1`, { data: { VIP: false } });
    expect(demote.status).toBe(403);
    expect(demote.body).toMatchObject({
      code: "ROW_NOT_ALLOWED",
      status: 403,
      message: expect.stringContaining("(CENTRO_DETT 'MI01', VIP false)"),
    });
    // Nothing of another unit is named: only the caller's own unit and filter.
    expect(JSON.stringify(demote.body)).not.toMatch(/RM01|HQ/);
    const { rows } = await t.services.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM "TB_ANAG_CUST00" WHERE "NAME" = 'Non VIP' OR ("CUST_ID" = $1 AND "VIP" = false)`,
      [uno],
    );
    expect(rows[0]!.n).toBe(0);
    const outboxAfter = await t.services.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM "TB_ANAG_OUTBOX00"`,
    );
    expect(outboxAfter.rows[0]!.n).toBe(outboxBefore.rows[0]!.n);
    // A VIP customer is written, in the caller's unit.
    const ok = await as.vipmi!.post("/api/v4/core/CUST?source=anag-1", {
      data: { NAME: "VIP Nuovo", CITY_ID: "MI", VIP: true },
    });
    expect(ok.status).toBe(201);
  });

  it("a write scope that holds for no row refuses every write, saying so (no field to show)", async () => {
    expect(await names(as.norows!, "/api/v4/core/CUST?source=anag-1")).toEqual([]);
    const res = await as.norows!.post("/api/v4/core/CUST?source=anag-1", {
      data: { NAME: "Nessuno" },
    });
    expect(res.status).toBe(403);
    expect(res.body).toMatchObject({
      code: "ROW_NOT_ALLOWED",
      message: expect.stringContaining(
        "The CUST record as written is outside the rows your grants let you write: no row (a ROW_FILTER of your grants cannot hold for your values).",
      ),
      details: { dimension: "CUST", written: {} },
    });
  });

  it("{user} in a ROW_FILTER stands for the caller; all_rows lifts the unit but not the filter", async () => {
    const roma = await idOf("Roma Uno");
    expect(
      (await as.boss!.patch(`/api/v4/core/CUST/${roma}?source=anag-1`, { data: { SALES_REP: "mine" } }))
        .status,
    ).toBe(200);
    expect(await names(as.mine!, "/api/v4/core/CUST?source=anag-1")).toEqual(["Roma Uno"]);
  });

  it("a live subscription gets only the events of rows in the subscriber's scope", async () => {
    const runtime = await startEventRuntime(t.services, { relay: true });
    const miEvents = await subscribeToEvents(t.services, await contextOf("mi", "MI01"), "CUST", null);
    const rmEvents = await subscribeToEvents(t.services, await contextOf("rm", "RM01"), "CUST", null);
    try {
      expect(
        (await as.rm!.post("/api/v4/core/CUST?source=anag-1", { data: { NAME: "Evento Roma" } })).status,
      ).toBe(201);
      expect(
        (await as.mi!.post("/api/v4/core/CUST?source=anag-1", { data: { NAME: "Evento Milano" } })).status,
      ).toBe(201);
      expect(
        (await as.rm!.post("/api/v4/core/CUST?source=anag-1", { data: { NAME: "Evento Roma 2" } })).status,
      ).toBe(201);
      // Events are delivered in order; the relay may first publish earlier tests' creates (each
      // subscriber gets only its unit's of those too). Read up to the last of one's own unit: the
      // other unit's record, written in between, never came.
      const namesUpTo = async (
        events: AsyncIterableIterator<{ data: Record<string, unknown> | null }>,
        last: string,
      ) => {
        const seen: unknown[] = [];
        for (;;) {
          const { value, done } = await events.next();
          if (done) return seen;
          seen.push(value.data?.NAME);
          if (value.data?.NAME === last) return seen;
        }
      };
      const mi = await namesUpTo(miEvents, "Evento Milano");
      expect(mi).not.toContain("Evento Roma");
      expect(mi.at(-1)).toBe("Evento Milano");
      const rm = await namesUpTo(rmEvents, "Evento Roma 2");
      expect(rm).toContain("Evento Roma");
      expect(rm).not.toContain("Evento Milano");
      expect(rm).not.toContain("Nuovo Milano");
    } finally {
      await miEvents.return?.();
      await rmEvents.return?.();
      await runtime.stop();
    }
  });

  it("an update that takes a row out of a subscriber's scope is told to them, judged on the row before it too", async () => {
    const context = await contextOf("vipmi", "MI01");
    const [tre, due] = [await idOf("Milano Tre"), await idOf("Milano Due")];
    const runtime = await startEventRuntime(t.services, { relay: true });
    const events = await subscribeToEvents(t.services, context, "CUST", ["CUSTUpdated"]);
    const patch = async (id: number, data: Record<string, unknown>) =>
      expect((await as.boss!.patch(`/api/v4/core/CUST/${id}?source=anag-1`, { data })).status).toBe(200);
    try {
      // vipmi sees MI01's VIP customers. Milano Tre leaves that scope (no longer VIP), Milano Due
      // (never in it) changes, then Milano Tre comes back.
      await patch(tre, { VIP: false });
      await patch(due, { CREDIT_LIMIT: 2500 });
      await patch(tre, { VIP: true });
      const seen: Array<[string, unknown]> = [];
      while (seen.filter(([id]) => id === String(tre)).length < 2) {
        const { value, done } = await events.next();
        if (done) break;
        seen.push([value.record_id, value.data === null ? null : value.data.VIP]);
      }
      // The row that left is told without its new values (vipmi no longer sees it); Milano Due's
      // change never comes; the row's return comes with its data.
      expect(seen).toEqual([
        [String(tre), null],
        [String(tre), true],
      ]);
    } finally {
      await events.return?.();
      await runtime.stop();
      await patch(due, { CREDIT_LIMIT: 2000 });
    }
    // The event carries the values the update changed, beside the record after it.
    const { rows } = await t.services.db.query<{ PREVIOUS: Record<string, unknown> | null }>(
      `SELECT "PREVIOUS" FROM "TB_ANAG_OUTBOX00" WHERE "AGGREGATE_TYPE" = 'CUST' AND "AGGREGATE_ID" = $1
        ORDER BY "OUTBOX_ID" DESC LIMIT 2`,
      [String(tre)],
    );
    expect(rows.map((r) => r.PREVIOUS?.VIP)).toEqual([false, true]);
  });

  it("a live subscription follows metadata changes: a field hidden since is left out, access lost ends it", async () => {
    const runtime = await startEventRuntime(t.services, { relay: true });
    const events = await subscribeToEvents(t.services, await contextOf("mi", "MI01"), "CUST", [
      "CUSTCreated",
    ]);
    const anna = client(t.app, await loginAs(t.app, "anna", "anna-secret-1"));
    const named = async (name: string) => {
      for (;;) {
        const { value, done } = await events.next();
        if (done) throw new Error(`the stream ended before ${name}`);
        if (value.data?.NAME === name) return value.data;
      }
    };
    const create = async (name: string) =>
      expect((await as.mi!.post("/api/v4/core/CUST?source=anag-1", { data: { NAME: name } })).status).toBe(
        201,
      );
    try {
      await create("Prima del peso");
      expect(Object.keys(await named("Prima del peso"))).toContain("SALES_REP");
      // SALES_REP weighed for peso 1 only: mi (peso 2) no longer reads it, and the open stream
      // leaves it out as a read made now does.
      const weighed = await anna.patch("/api/v4/core/COST/CUST/10?source=erp", { data: { COD_UTENTE: 1 } });
      expect(weighed.status, JSON.stringify(weighed.body)).toBe(200);
      await create("Dopo il peso");
      const after = await named("Dopo il peso");
      expect(Object.keys(after)).not.toContain("SALES_REP");
      expect(after.NAME).toBe("Dopo il peso");
      // The customers' node moved out of mi's grant (anag): the stream ends with the refusal a read
      // gets, at the next event (one written straight to the outbox: nobody may write CUST there now).
      const moved = await anna.patch("/api/v4/core/MENU/anag-1?source=erp", {
        data: { NLEFT: 100, NRIGHT: 101 },
      });
      expect(moved.status, JSON.stringify(moved.body)).toBe(200);
      expect((await as.mi!.get("/api/v4/core/CUST?source=anag-1")).status).toBe(403);
      await t.services.db.query(
        `INSERT INTO "TB_ANAG_OUTBOX00" ("EVENT_TYPE", "AGGREGATE_TYPE", "AGGREGATE_ID", "PAYLOAD", "TENANT_ID", "CREATED_AT")
         VALUES ('CUSTCreated', 'CUST', '9999', '{"CUST_ID": 9999, "NAME": "Fuori", "CENTRO_DETT": "MI01"}', 'acme', now())`,
      );
      await expect(named("Fuori")).rejects.toMatchObject({ status: 403, code: "INSUFFICIENT_PERMISSIONS" });
      expect(await events.next()).toEqual({ value: undefined, done: true });
    } finally {
      await events.return?.();
      await runtime.stop();
      await anna.patch("/api/v4/core/MENU/anag-1?source=erp", { data: { NLEFT: 3, NRIGHT: 4 } });
      await anna.patch("/api/v4/core/COST/CUST/10?source=erp", { data: { COD_UTENTE: null } });
    }
  });

  it("an upload onto a record outside the caller's write scope is refused as a missing record, before its body", async () => {
    const context = await contextOf("mi", "MI01");
    const [mine, theirs] = [await idOf("Milano Uno"), await idOf("Roma Uno")];
    await expect(
      authorizeUpload(t.services, context, { dim: "CUST", recordId: String(mine) }),
    ).resolves.toBeUndefined();
    const refused = await authorizeUpload(t.services, context, {
      dim: "CUST",
      recordId: String(theirs),
    }).catch((err: unknown) => err);
    const missing = await authorizeUpload(t.services, context, { dim: "CUST", recordId: "987654" }).catch(
      (err: unknown) => err,
    );
    expect(refused).toBeInstanceOf(ApiError);
    expect((refused as ApiError).status).toBe(404);
    // Byte for byte a record that does not exist, but for its id.
    const absent = (missing as ApiError).toBody();
    expect((refused as ApiError).toBody()).toEqual({
      ...absent,
      message: absent.message.replace("987654", String(theirs)),
      details: { ...absent.details, id: String(theirs) },
    });
  });

  it("a change of the user's unit in TB_USER reaches their open session at once", async () => {
    const token = await loginAs(t.app, "rm", "rm-secret-1");
    const rmNow = client(t.app, token);
    expect(await names(rmNow, "/api/v4/core/CUST?source=anag-1")).toContain("Roma Uno");
    await t.services.db.query(`UPDATE "TB_USER" SET "CENTRO_DETT" = 'HQ' WHERE "USER_ID" = 'rm'`);
    try {
      await t.services.db.listenersCaughtUp();
      expect(await names(rmNow, "/api/v4/core/CUST?source=anag-1")).toEqual(inUnit("HQ"));
    } finally {
      await t.services.db.query(`UPDATE "TB_USER" SET "CENTRO_DETT" = 'RM01' WHERE "USER_ID" = 'rm'`);
      await t.services.db.listenersCaughtUp();
    }
  });

  it("a webhook delivers only the events of rows in its registrant's scope", async () => {
    const reg = await as.admmi!.post("/api/v4/webhooks", {
      url: "https://hooks.example.com/scoped",
      events: ["CUSTCreated"],
      dimensions: ["CUST"],
      secret: "s3cret-s3cret-s3cret",
    });
    expect(reg.status).toBe(201);
    const id = Number((reg.body as { webhook_id: string }).webhook_id);
    const { rows: owner } = await t.services.db.query<{ CREATED_BY: string }>(
      `SELECT "CREATED_BY" FROM "TB_WEBHOOK" WHERE "WEBHOOK_ID" = $1`,
      [id],
    );
    expect(owner).toEqual([{ CREATED_BY: "admmi" }]);
    const dispatch = createWebhookDispatcher({
      db: t.services.db,
      metadata: t.services.metadata,
      onQueued: () => {},
    });
    const event = (n: number, unit: string): ReceivedEvent => {
      const body = {
        OUTBOX_ID: String(900_000 + n),
        EVENT_TYPE: "CUSTCreated",
        AGGREGATE_TYPE: "CUST",
        AGGREGATE_ID: String(n),
        PAYLOAD: { CUST_ID: n, NAME: `Hook ${n}`, CENTRO_DETT: unit },
        CREATED_AT: "2026-11-27T10:00:00.000Z",
        TENANT_ID: "acme",
      };
      return {
        id: body.OUTBOX_ID,
        type: body.EVENT_TYPE,
        tenantId: "acme",
        dimension: "CUST",
        timestamp: new Date(body.CREATED_AT),
        body: Buffer.from(JSON.stringify(body)),
        attempt: 1,
      };
    };
    await dispatch([event(1, "MI01"), event(2, "RM01"), event(3, "MI01")]);
    const { rows } = await t.services.db.query<{ OUTBOX_ID: string }>(
      `SELECT "OUTBOX_ID"::text AS "OUTBOX_ID" FROM "TB_WEBHOOK_DELIVERY" WHERE "WEBHOOK_ID" = $1 ORDER BY 1`,
      [id],
    );
    expect(rows.map((r) => r.OUTBOX_ID)).toEqual(["900001", "900003"]);
    // A record now of RM01 whose update took it out of MI01 (its PREVIOUS) reaches the MI01
    // registrant; one that was never of MI01 does not.
    const moved = (n: number, previous?: Record<string, unknown>): ReceivedEvent => {
      const e = event(n, "RM01");
      const body = JSON.parse(e.body.toString()) as Record<string, unknown>;
      return {
        ...e,
        body: Buffer.from(JSON.stringify({ ...body, ...(previous ? { PREVIOUS: previous } : {}) })),
      };
    };
    await dispatch([moved(4, { CENTRO_DETT: "MI01" }), moved(5, { CENTRO_DETT: "HQ" }), moved(6)]);
    const after = await t.services.db.query<{ OUTBOX_ID: string; BODY: string }>(
      `SELECT "OUTBOX_ID"::text AS "OUTBOX_ID", "BODY" FROM "TB_WEBHOOK_DELIVERY" WHERE "WEBHOOK_ID" = $1 ORDER BY 1`,
      [id],
    );
    expect(after.rows.map((r) => r.OUTBOX_ID)).toEqual(["900001", "900003", "900004"]);
    // Its body says which record left, without the values it now holds.
    expect(after.rows.map((r) => JSON.parse(r.BODY).data === null)).toEqual([false, false, true]);
  });

  it("a login may name a unit TB_USER.CENTRI lists, and the session keeps it; any other is 403", async () => {
    const rmSession = client(t.app, await loginAs(t.app, "multi", "multi-secret-1", { centro_dett: "RM01" }));
    expect(await names(rmSession, "/api/v4/core/CUST?source=anag-1")).toEqual(
      expect.arrayContaining(inUnit("RM01")),
    );
    expect(await names(rmSession, "/api/v4/core/CUST?source=anag-1")).not.toContain("Milano Uno");
    const own = client(t.app, await loginAs(t.app, "multi", "multi-secret-1"));
    expect(await names(own, "/api/v4/core/CUST?source=anag-1")).toContain("Milano Uno");
    const other = await t.app.inject({
      method: "POST",
      url: "/auth/login",
      payload: { username: "multi", password: "multi-secret-1", centro_dett: "HQ" },
    });
    expect(other.statusCode).toBe(403);
    expect(other.json()).toMatchObject({ details: { reason: "centro_dett_not_own" } });
  });

  it("a ROW_FILTER naming a field no dimension under its node has is refused when written", async () => {
    const f = await scopedFixture();
    f.users = [user("bad", "MI01", [{ ...ANAG_RW, COD_MENU: "anag-3", ROW_FILTER: "VIP eq true" }])];
    const checked = await checkFixture(t.services, f);
    expect(checked.problems).toContainEqual({
      path: "users[0].grants[0].ROW_FILTER",
      message: expect.stringContaining("no dimension under anag-3"),
    });
    f.users = [user("bad", "MI01", [{ ...ANAG_RW, ROW_FILTER: "VIP eq (" }])];
    const unparsable = await checkFixture(t.services, f);
    expect(unparsable.problems.map((p) => p.path)).toContain("users[0].grants[0].ROW_FILTER");
  });

  it("a ROW_FILTER whose value its field's type cannot hold is refused when written, saying so", async () => {
    const f = await scopedFixture();
    f.users = [user("bad", "MI01", [{ ...ANAG_RW, ROW_FILTER: "VIP eq true and CREDIT_LIMIT gt 'lots'" }])];
    const checked = await checkFixture(t.services, f);
    expect(checked.problems).toContainEqual({
      path: "users[0].grants[0].ROW_FILTER",
      message: expect.stringContaining(
        `ROW_FILTER of the grant on anag: CREDIT_LIMIT is a DECIMAL field of CUST, and "lots" cannot be compared with it by gt`,
      ),
    });
    expect(checked.problems.find((p) => p.path === "users[0].grants[0].ROW_FILTER")!.message).toMatch(
      /would match no rows; give a DECIMAL value/,
    );
    // A placeholder stands for the caller's value: judged per request, accepted here.
    f.users = [
      user("ok", "MI01", [{ ...ANAG_RW, ROW_FILTER: "SALES_REP eq '{user}' and CREDIT_LIMIT gt 10" }]),
    ];
    expect((await checkFixture(t.services, f)).problems).toEqual([]);
  });

  it("removing ROW_SCOPE while the scope column holds units is refused (409), saying why and what to do", async () => {
    const admin = client(t.app, await loginAs(t.app, "anna", "anna-secret-1"));
    const res = await admin.patch("/api/v4/core/DIM/CUST?source=erp", { data: { ROW_SCOPE: null } });
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject({
      code: "UNSAFE_SCHEMA_CHANGE",
      message: expect.stringContaining("removes a ROW_SCOPE key whose system column holds values"),
      errors: [
        {
          field: "CUST.ROW_SCOPE",
          message: expect.stringContaining(
            "removing centro_dett from the ROW_SCOPE of CUST drops the system column CENTRO_DETT of TB_ANAG_CUST00, which holds the centro_dett of its rows",
          ),
        },
      ],
    });
    const message = (res.body as { errors: Array<{ message: string }> }).errors[0]!.message;
    expect(message).toContain(
      `first clear the column deliberately (UPDATE "TB_ANAG_CUST00" SET "CENTRO_DETT" = NULL)`,
    );
    expect(message).toContain("grant with all_rows");
    expect(
      t.services.metadata
        .current()
        .dimensions.get("CUST")!
        .rowScope.map((k) => k.key),
    ).toEqual(["centro_dett"]);
  });

  it("an invalid ROW_SCOPE is refused by the metadata API (400) and changes nothing", async () => {
    const admin = client(t.app, await loginAs(t.app, "anna", "anna-secret-1"));
    const res = await admin.patch("/api/v4/core/DIM/CITY?source=erp", {
      data: { ROW_SCOPE: "centro_dett,region" },
    });
    expect(res.status).toBe(400);
    expect(JSON.stringify(res.body)).toContain("region");
    expect(t.services.metadata.current().dimensions.get("CITY")!.rowScope).toEqual([]);
  });
});

describe("row scope in the demo data", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp(BACKENDS[0]!, { fixture: "demo", env: NO_RATE_LIMITS });
  }, 120_000);
  afterAll(async () => {
    await t?.close();
  });

  it("each warehouse clerk sees the purchase orders of their warehouse; all_rows sees every one", async () => {
    const units = async (name: string) => {
      const c = client(
        t.app,
        await loginAs(t.app, name, `${name}-demo-${{ nora: 5, sven: 6, pietro: 2, sara: 3 }[name]}`),
      );
      const res = await c.get("/api/v4/core/PO?source=purchasing-1&$fields=PO_ID,CENTRO_DETT");
      expect(res.status).toBe(200);
      return (res.body as { data: Array<{ CENTRO_DETT: string }> }).data.map((r) => r.CENTRO_DETT).sort();
    };
    expect(await units("nora")).toEqual(["WH-NORTH"]);
    expect(await units("sven")).toEqual(["WH-SOUTH"]);
    // sara (README: "read items and orders") sees her shop's order.
    expect(await units("sara")).toEqual(["SHOP"]);
    expect(await units("pietro")).toEqual(["SHOP", "WH-NORTH", "WH-SOUTH"]);
  });

  it("order lines are scoped with their orders: a clerk reads and writes only their warehouse's lines, and the lines of a new order are theirs", async () => {
    const as = async (name: "nora" | "sven" | "pietro") =>
      client(t.app, await loginAs(t.app, name, `${name}-demo-${{ nora: 5, sven: 6, pietro: 2 }[name]}`));
    const [nora, sven, pietro] = [await as("nora"), await as("sven"), await as("pietro")];
    const lines = async (c: typeof nora) => {
      const res = await c.get(
        "/api/v4/core/POL?source=purchasing-2&$fields=POL_ID,PO_ID,CENTRO_DETT&sort=POL_ID",
      );
      expect(res.status).toBe(200);
      return (res.body as { data: Array<{ POL_ID: number; PO_ID: number; CENTRO_DETT: string }> }).data;
    };
    const all = await lines(pietro);
    expect(all.map((l) => l.CENTRO_DETT).sort()).toEqual(["SHOP", "WH-NORTH", "WH-SOUTH"]);
    expect((await lines(nora)).map((l) => l.CENTRO_DETT)).toEqual(["WH-NORTH"]);
    const south = all.find((l) => l.CENTRO_DETT === "WH-SOUTH")!;
    // Another warehouse's line is as absent as another tenant's: 404 to read and to write.
    expect((await nora.get(`/api/v4/core/POL/${south.POL_ID}?source=purchasing-2`)).status).toBe(404);
    expect(
      (await nora.patch(`/api/v4/core/POL/${south.POL_ID}?source=purchasing-2`, { data: { QTY_KG: 1 } }))
        .status,
    ).toBe(404);
    expect((await lines(sven)).map((l) => l.POL_ID)).toEqual([south.POL_ID]);
    // A new order's lines (insert cascade) are stamped with the clerk's warehouse, as the order is.
    const created = await nora.post("/api/v4/core/PO?source=purchasing-1", {
      data: { SUPP_ID: 1, PO_DATE: "20261120", POL: [{ ITEM_ID: "GC-0001", QTY_KG: 10 }] },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const mine = await lines(nora);
    expect(mine.filter((l) => l.PO_ID === created.body.data.PO_ID).map((l) => l.CENTRO_DETT)).toEqual([
      "WH-NORTH",
    ]);
    expect((await lines(sven)).map((l) => l.POL_ID)).toEqual([south.POL_ID]);
  });
});
