// Cascades under row scope (decisions.md §17 with docs/decisions.md "Cascades"): a cascade reaches
// only the children the caller may write, so a key change, force delete or soft delete that would
// leave children of another unit behind (naming a key that is gone, or live under a cancelled
// record) is 409 KEY_IN_USE and changes nothing; a caller whose grant covers every row (all_rows)
// cascades to all. A restore leaves another unit's cancelled children cancelled, and a child is
// restored only while the records its keys name are live (400 INVALID_FOREIGN_KEY, as a create).
// The fixture is the sample's, with CUST and ORDL scoped by centro_dett.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loginAs } from "../helpers/auth.ts";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";
import { row, sampleFixtureWith, setRow, snapshot } from "./helpers.ts";
import { type Client, client, NO_RATE_LIMITS } from "./http.ts";

const user = (id: string, centro: string, anag: string[], sales: string[]) => ({
  user_id: id,
  password: `${id}-secret-1`,
  tenant_id: "acme",
  peso: "2",
  centro_dett: centro,
  ambiente: "production",
  grants: [
    { COD_MENU: "anag", OPERATIONS: anag, LEVEL: 3 },
    { COD_MENU: "sales", OPERATIONS: sales, LEVEL: 3 },
    { COD_MENU: "catalog", OPERATIONS: ["read"], LEVEL: 1 },
  ],
});

/** Customers 1–5 as the sample's, placed in units: 4 (RM01) lives in Milano as 1 (MI01) does. */
const UNITS = ["MI01", "RM01", "MI01", "RM01", "HQ"];

describe.each(BACKENDS)("cascades within the caller's row scope (%s)", (backend) => {
  let t: TestApp;
  const as: Record<string, Client> = {};

  beforeAll(async () => {
    const fixture = await sampleFixtureWith((f) => {
      setRow(f.TB_DIM, { COD_DIM: "CITY" }, { UPDATE_CASCADE: "CUST,ADDR" });
      setRow(f.TB_DIM, { COD_DIM: "CUST" }, { ROW_SCOPE: "centro_dett" });
      setRow(f.TB_DIM, { COD_DIM: "ORD" }, { UPDATE_CASCADE: "ORDL" });
      setRow(f.TB_DIM, { COD_DIM: "ORDL" }, { ROW_SCOPE: "centro_dett" });
      setRow(f.TB_COST, { COD_DIM: "CITY", COD_VAR: "CITY_ID" }, { COD_ON_OFF: "LDRNM" });
      const records = f.records as unknown as Record<string, Array<{ data: Record<string, unknown> }>>;
      records.CUST!.forEach((r, i) => {
        r.data.CENTRO_DETT = UNITS[i];
      });
      f.users!.push(
        user("mi", "MI01", ["read", "write"], ["read", "write", "force_delete"]),
        user("rm", "RM01", ["read", "write"], ["read", "write", "force_delete"]),
        user("boss", "HQ", ["read", "write", "all_rows"], ["read", "write", "force_delete", "all_rows"]),
      );
    });
    t = await createTestApp(backend, { fixture, env: NO_RATE_LIMITS });
    for (const name of ["mi", "rm", "boss"])
      as[name] = client(t.app, await loginAs(t.app, name, `${name}-secret-1`));
  }, 120_000);
  afterAll(async () => {
    await t?.close();
  });

  const cityOf = async (custId: number) =>
    (await row(t.services, "TB_ANAG_CUST00", "CUST_ID", custId))?.CITY_ID;
  const lineOf = (id: number) => row(t.services, "TB_DOC_ORDL00", "ORDL_ID", id);
  const orderOf = (id: number) => row(t.services, "TB_DOC_ORD00", "ORD_ID", id);

  /** An order of mi's (customer 1) with one line of mi's (MI01) and one rm adds (RM01). */
  async function orderOfTwoUnits() {
    const order = await as.mi!.post("/api/v4/core/ORD?source=sales-1", {
      data: { CUST_ID: 1, ORDL: [{ PROD_ID: "P0001", QTY: 1 }] },
    });
    expect(order.status, JSON.stringify(order.body)).toBe(201);
    const ordId = order.body.data.ORD_ID as number;
    const theirs = await as.rm!.post("/api/v4/core/ORDL?source=sales-2", {
      data: { ORD_ID: ordId, PROD_ID: "P0002", QTY: 2 },
    });
    expect(theirs.status, JSON.stringify(theirs.body)).toBe(201);
    const mine = order.body.data.ORDL[0].ORDL_ID as number;
    expect((await lineOf(mine))?.CENTRO_DETT).toBe("MI01");
    expect((await lineOf(theirs.body.data.ORDL_ID))?.CENTRO_DETT).toBe("RM01");
    return { ordId, mine, theirs: theirs.body.data.ORDL_ID as number };
  }

  it("a key change that another unit's children (UPDATE_CASCADE) name is 409 KEY_IN_USE and changes nothing", async () => {
    const before = await snapshot(t.services);
    // Customer 4 (RM01) lives in Milano: mi cannot rewrite it, so the key cannot move.
    const res = await as.mi!.patch("/api/v4/core/CITY/MI?source=anag-3", { data: { CITY_ID: "MX" } });
    expect(res.status).toBe(409);
    expect(res.body).toEqual({
      error: "Conflict",
      code: "KEY_IN_USE",
      status: 409,
      field: "CITY_ID",
      message:
        'CITY.CITY_ID "MI" is named by CUST records (CITY_ID) outside the rows you may write, which the update cascade (UPDATE_CASCADE) cannot change for you. Nothing was changed: a user whose grant covers those rows (all_rows) can change the key, or those records can be pointed elsewhere first.',
      details: { dimension: "CUST", field: "CITY_ID", scope: "outside" },
    });
    expect(await snapshot(t.services)).toEqual(before);
    expect([await cityOf(1), await cityOf(4)]).toEqual(["MI", "MI"]);
  });

  it("a key change named only within the caller's scope cascades as before", async () => {
    // Torino: customer 3 (MI01) and an address (unscoped).
    const res = await as.mi!.patch("/api/v4/core/CITY/TO?source=anag-3", { data: { CITY_ID: "TX" } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(
      (res.body.cascaded as Array<{ dimension: string; id: number }>)
        .map((c) => `${c.dimension}/${c.id}`)
        .sort(),
    ).toEqual(["ADDR/2", "CUST/3"]);
    expect(await cityOf(3)).toBe("TX");
    expect((await row(t.services, "TB_ANAG_ADDR00", "ADDR_ID", 2))?.CITY_ID).toBe("TX");
  });

  it("another unit's cancelled children count too; a caller with all_rows cascades to every unit", async () => {
    // Roma: customer 2 (RM01), cancelled by rm (its address with it).
    expect((await as.rm!.delete("/api/v4/core/CUST/2?source=anag-1")).status).toBe(200);
    const refused = await as.mi!.patch("/api/v4/core/CITY/RM?source=anag-3", { data: { CITY_ID: "RX" } });
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({
      code: "KEY_IN_USE",
      details: { dimension: "CUST", field: "CITY_ID" },
    });
    expect(await cityOf(2)).toBe("RM");
    // boss's grant lifts the scope: Milano moves with customers 1 and 4 and the address.
    const moved = await as.boss!.patch("/api/v4/core/CITY/MI?source=anag-3", { data: { CITY_ID: "MX" } });
    expect(moved.status, JSON.stringify(moved.body)).toBe(200);
    expect([await cityOf(1), await cityOf(4)]).toEqual(["MX", "MX"]);
    expect((await row(t.services, "TB_ANAG_ADDR00", "ADDR_ID", 1))?.CITY_ID).toBe("MX");
    const named = await t.services.db.query(`SELECT 1 FROM "TB_ANAG_CUST00" WHERE "CITY_ID" = 'MI'`);
    expect(named.rows).toHaveLength(0);
  });

  it("a soft or force delete whose cascade (CASCADE_DELETE) would miss another unit's children is 409 and changes nothing", async () => {
    const { ordId, mine, theirs } = await orderOfTwoUnits();
    const before = await snapshot(t.services);
    const soft = await as.mi!.delete(`/api/v4/core/ORD/${ordId}?source=sales-1`);
    expect(soft.status).toBe(409);
    expect(soft.body).toEqual({
      error: "Conflict",
      code: "KEY_IN_USE",
      status: 409,
      field: "ORD_ID",
      message: `ORD.ORD_ID ${ordId} is named by ORDL records (ORD_ID) outside the rows you may write, which the delete cascade (CASCADE_DELETE) cannot cancel for you. Nothing was cancelled: a user whose grant covers those rows (all_rows) can delete it, or those records can be cancelled or pointed elsewhere first.`,
      details: { dimension: "ORDL", field: "ORD_ID", scope: "outside" },
    });
    const force = await as.mi!.delete(`/api/v4/core/ORD/${ordId}?source=sales-1&force=true`);
    expect(force.status).toBe(409);
    expect(force.body).toMatchObject({
      code: "KEY_IN_USE",
      field: "ORD_ID",
      details: { dimension: "ORDL", field: "ORD_ID", scope: "outside" },
    });
    expect(force.body.message).toContain("cannot delete for you. Nothing was deleted");
    expect(await snapshot(t.services)).toEqual(before);

    // rm cancels their line: a cancelled child stays for a cancelled order, so the soft delete goes.
    expect((await as.rm!.delete(`/api/v4/core/ORDL/${theirs}?source=sales-2`)).status).toBe(200);
    const cancelled = await as.mi!.delete(`/api/v4/core/ORD/${ordId}?source=sales-1`);
    expect(cancelled.status, JSON.stringify(cancelled.body)).toBe(200);
    expect(cancelled.body.cascaded).toMatchObject([{ dimension: "ORDL", id: mine, trec: "C" }]);
    expect([(await orderOf(ordId))?.TREC, (await lineOf(mine))?.TREC, (await lineOf(theirs))?.TREC]).toEqual([
      "C",
      "C",
      "C",
    ]);
    // A force delete would leave rm's cancelled line naming nothing: still refused.
    const stillNamed = await as.mi!.delete(`/api/v4/core/ORD/${ordId}?source=sales-1&force=true`);
    expect(stillNamed.status).toBe(409);
    expect(await orderOf(ordId)).toBeDefined();
    // boss (all_rows) removes the order with every line.
    const removed = await as.boss!.delete(`/api/v4/core/ORD/${ordId}?source=sales-1&force=true`);
    expect(removed.status, JSON.stringify(removed.body)).toBe(200);
    expect(await orderOf(ordId)).toBeUndefined();
    const lines = await t.services.db.query(`SELECT 1 FROM "TB_DOC_ORDL00" WHERE "ORD_ID" = $1`, [ordId]);
    expect(lines.rows).toHaveLength(0);
  });

  it("a line is restored only under a live order (400 INVALID_FOREIGN_KEY, as a create); a restore leaves another unit's lines cancelled", async () => {
    const { ordId, mine, theirs } = await orderOfTwoUnits();
    const cancelled = await as.boss!.delete(`/api/v4/core/ORD/${ordId}?source=sales-1`);
    expect(cancelled.status).toBe(200);
    expect((cancelled.body.cascaded as unknown[]).length).toBe(2);

    // A create under the cancelled order is refused; so is a restore, by command or by PATCH.
    const created = await as.rm!.post("/api/v4/core/ORDL?source=sales-2", {
      data: { ORD_ID: ordId, PROD_ID: "P0002", QTY: 2 },
    });
    expect(created.status).toBe(400);
    expect(created.body).toMatchObject({ code: "INVALID_FOREIGN_KEY", field: "ORD_ID" });
    const before = await snapshot(t.services);
    const command = await as.rm!.post("/api/v4/core/ORDL/command/restore?source=sales-2", { id: theirs });
    expect(command.status).toBe(400);
    expect(command.body).toEqual({
      error: "BadRequest",
      code: "INVALID_FOREIGN_KEY",
      status: 400,
      field: "ORD_ID",
      message: `ORD_ID: ${ordId} does not exist in ORD. A restored record's keys must name live records, as a create's: restore that ORD record first if it is cancelled, or give ORD_ID another value.`,
    });
    const patched = await as.rm!.patch(`/api/v4/core/ORDL/${theirs}?source=sales-2`, { data: { TREC: "M" } });
    expect(patched.status).toBe(400);
    expect(patched.body).toMatchObject({ code: "INVALID_FOREIGN_KEY", field: "ORD_ID" });
    expect(await snapshot(t.services)).toEqual(before);
    expect((await lineOf(theirs))?.TREC).toBe("C");

    // mi restores the order: their line comes back with it, rm's stays cancelled (not theirs to write).
    const restored = await as.mi!.post("/api/v4/core/ORD/command/restore?source=sales-1", { id: ordId });
    expect(restored.status, JSON.stringify(restored.body)).toBe(200);
    expect(restored.body.cascaded).toMatchObject([{ dimension: "ORDL", id: mine, trec: "M" }]);
    expect([(await orderOf(ordId))?.TREC, (await lineOf(mine))?.TREC, (await lineOf(theirs))?.TREC]).toEqual([
      "M",
      "M",
      "C",
    ]);
    // Under the live order rm restores their own line.
    const own = await as.rm!.post("/api/v4/core/ORDL/command/restore?source=sales-2", { id: theirs });
    expect(own.status, JSON.stringify(own.body)).toBe(200);
    expect((await lineOf(theirs))?.TREC).toBe("M");
    expect((await lineOf(theirs))?.ORD_ID).toBe(ordId);
  });
});
