// HTTP: the cascades of decisions.md §5, each cascaded change audited and evented.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";
import { lastOutboxId, outboxRows, row, sampleFixtureWith, setRow, snapshot } from "./helpers.ts";
import { type Client, clientFor, NO_RATE_LIMITS } from "./http.ts";

describe.each(BACKENDS)("cascades over HTTP (%s)", (backend) => {
  let t: TestApp;
  let anna: Client;

  beforeAll(async () => {
    const fixture = await sampleFixtureWith((f) => {
      setRow(f.TB_DIM, { COD_DIM: "CITY" }, { UPDATE_CASCADE: "CUST,ADDR" });
      setRow(f.TB_DIM, { COD_DIM: "CUST" }, { UPDATE_CASCADE: "ADDR" });
      setRow(f.TB_DIM, { COD_DIM: "ORD" }, { UPDATE_CASCADE: "ORDL" });
      setRow(f.TB_COST, { COD_DIM: "CITY", COD_VAR: "CITY_ID" }, { COD_ON_OFF: "LDRNM" });
    });
    t = await createTestApp(backend, { fixture, env: NO_RATE_LIMITS });
    anna = await clientFor(t.app, "anna");
  });
  afterAll(async () => {
    await t?.close();
  });

  async function customerWithAddresses(n: number) {
    const cust = await anna.post("/api/v4/core/CUST?source=anag-1", { data: { NAME: "Cascade Srl" } });
    const ids: number[] = [];
    for (let i = 0; i < n; i++) {
      const addr = await anna.post("/api/v4/core/ADDR?source=anag-2", {
        data: { CUST_ID: cust.body.data.CUST_ID, KIND: `K${i}` },
      });
      expect(addr.status).toBe(201);
      ids.push(addr.body.data.ADDR_ID);
    }
    return { custId: cust.body.data.CUST_ID as number, addrIds: ids };
  }

  const addr = (id: number) => row(t.services, "TB_ANAG_ADDR00", "ADDR_ID", id);

  it("insert cascade: child records in the create body are created with their foreign key, audited and evented", async () => {
    const last = await lastOutboxId(t.services);
    const res = await anna.post("/api/v4/core/ORD?source=sales-1", {
      data: {
        CUST_ID: 1,
        ORDL: [
          { PROD_ID: "P0001", QTY: 5, PRICE: 0.12 },
          { PROD_ID: "P0002", QTY: 1 },
        ],
      },
    });
    expect(res.status).toBe(201);
    const ordId = res.body.data.ORD_ID;
    expect(res.body.data.ORDL).toHaveLength(2);
    expect(res.body.data.ORDL[0]).toMatchObject({
      ORD_ID: ordId,
      PROD_ID: "P0001",
      TREC: "N",
      OWNER: "anna",
    });
    const lines = await t.services.db.query(
      `SELECT * FROM "TB_DOC_ORDL00" WHERE "ORD_ID" = $1 ORDER BY "ORDL_ID"`,
      [ordId],
    );
    expect(lines.rows).toHaveLength(2);
    expect(
      lines.rows.every((l) => l.TREC === "N" && l.OWNER === "anna" && /^\d{14}$/.test(String(l.CDATA))),
    ).toBe(true);
    const events = await outboxRows(t.services, last);
    expect(events.map((e) => e.EVENT_TYPE)).toEqual(["ORDCreated", "ORDLCreated", "ORDLCreated"]);
    expect(events[1]!.PAYLOAD).toMatchObject({ ORD_ID: ordId, PROD_ID: "P0001" });
  });

  it("insert cascade: a bad child record refuses the whole create", async () => {
    const before = await snapshot(t.services);
    const res = await anna.post("/api/v4/core/ORD?source=sales-1", {
      data: { CUST_ID: 1, ORDL: [{ PROD_ID: "P0001", QTY: 1 }, { PROD_ID: "P0001" }] },
    });
    expect(res.status).toBe(422);
    // The child's field by its place in the body: which line failed.
    expect(res.body).toMatchObject({ code: "REQUIRED_FIELD_MISSING", field: "ORDL[1].QTY" });
    const badFk = await anna.post("/api/v4/core/ORD?source=sales-1", {
      data: { CUST_ID: 1, ORDL: [{ PROD_ID: "NOPE", QTY: 1 }] },
    });
    expect(badFk.body).toMatchObject({ code: "INVALID_FOREIGN_KEY", field: "ORDL[0].PROD_ID" });
    const notList = await anna.post("/api/v4/core/ORD?source=sales-1", {
      data: { CUST_ID: 1, ORDL: { QTY: 1 } },
    });
    expect(notList.body).toMatchObject({ code: "INVALID_FIELD_VALUE", field: "ORDL" });
    const notObject = await anna.post("/api/v4/core/ORD?source=sales-1", {
      data: { CUST_ID: 1, ORDL: [{ PROD_ID: "P0001", QTY: 1 }, 7] },
    });
    expect(notObject.body).toMatchObject({ code: "INVALID_FIELD_VALUE", field: "ORDL[1]" });
    const unknown = await anna.post("/api/v4/core/ORD?source=sales-1", {
      data: {
        CUST_ID: 1,
        ORDL: [
          { PROD_ID: "P0001", QTY: 1 },
          { PROD_ID: "P0001", QTY: 1, NOPE: 1 },
        ],
      },
    });
    expect(unknown.body).toMatchObject({ code: "INVALID_FIELD", field: "ORDL[1].NOPE" });
    // The same paths in a batch item's error and a /core/batch operation's.
    const batch = await anna.post("/api/v4/core/ORD/batch?source=sales-1", {
      data: [{ CUST_ID: 1, ORDL: [{ PROD_ID: "P0001", QTY: 1 }, { PROD_ID: "P0001", QTY: 1 }, { QTY: 1 }] }],
    });
    expect(batch.body.results[0].error).toMatchObject({
      code: "REQUIRED_FIELD_MISSING",
      field: "ORDL[2].PROD_ID",
    });
    const core = await anna.post("/api/v4/core/batch?source=sales-1", {
      operations: [{ method: "POST", dim: "ORD", data: { CUST_ID: 1, ORDL: [{ PROD_ID: "NOPE", QTY: 1 }] } }],
    });
    expect(core.body).toMatchObject({
      code: "INVALID_FOREIGN_KEY",
      field: "ORDL[0].PROD_ID",
      details: { operation: 0 },
    });
    // A parent's own field is still named plainly.
    const parent = await anna.post("/api/v4/core/ORD?source=sales-1", {
      data: { CUST_ID: 999999, ORDL: [{ PROD_ID: "P0001", QTY: 1 }] },
    });
    expect(parent.body).toMatchObject({ code: "INVALID_FOREIGN_KEY", field: "CUST_ID" });
    expect(await snapshot(t.services)).toEqual(before);
  });

  it("delete cascade, soft: children are cancelled too, each audited and evented", async () => {
    const { custId, addrIds } = await customerWithAddresses(2);
    const last = await lastOutboxId(t.services);
    const res = await anna.delete(`/api/v4/core/CUST/${custId}?source=anag-1`);
    expect(res.status).toBe(200);
    for (const id of addrIds) expect(await addr(id)).toMatchObject({ TREC: "C", LOWNER: "anna" });
    const events = await outboxRows(t.services, last);
    expect(events.map((e) => [e.EVENT_TYPE, e.AGGREGATE_ID])).toEqual([
      ["CUSTDeleted", String(custId)],
      ["ADDRDeleted", String(addrIds[0])],
      ["ADDRDeleted", String(addrIds[1])],
    ]);
    // Each cascaded change names its own outbox row.
    expect(res.body.event_id).toBe(String(events[0]!.OUTBOX_ID));
    expect(res.body.cascaded).toEqual(
      addrIds.map((id, i) => ({
        dimension: "ADDR",
        id,
        action: "deleted",
        trec: "C",
        event_id: String(events[i + 1]!.OUTBOX_ID),
      })),
    );
  });

  it("update cascade on restore: restoring the parent restores its cancelled children", async () => {
    const { custId, addrIds } = await customerWithAddresses(2);
    await anna.delete(`/api/v4/core/CUST/${custId}?source=anag-1`);
    const last = await lastOutboxId(t.services);
    const res = await anna.patch(`/api/v4/core/CUST/${custId}?source=anag-1`, { data: { TREC: "M" } });
    expect(res.status).toBe(200);
    expect(res.body.data.TREC).toBe("M");
    for (const id of addrIds) expect(await addr(id)).toMatchObject({ TREC: "M", LOWNER: "anna" });
    const events = await outboxRows(t.services, last);
    expect(events.map((e) => e.EVENT_TYPE)).toEqual(["CUSTUpdated", "ADDRUpdated", "ADDRUpdated"]);
    expect(res.body.cascaded).toHaveLength(2);
  });

  it("delete cascade, force: children are removed too, each evented with force", async () => {
    const { custId, addrIds } = await customerWithAddresses(2);
    const last = await lastOutboxId(t.services);
    const res = await anna.delete(`/api/v4/core/CUST/${custId}?source=anag-1&force=true`);
    expect(res.status).toBe(200);
    for (const id of addrIds) expect(await addr(id)).toBeUndefined();
    const events = await outboxRows(t.services, last);
    expect(events.map((e) => e.EVENT_TYPE)).toEqual(["CUSTDeleted", "ADDRDeleted", "ADDRDeleted"]);
    expect(events.every((e) => e.PAYLOAD.force === true)).toBe(true);
    expect(res.body.cascaded.map((c: { event_id: string }) => c.event_id)).toEqual(
      events.slice(1).map((e) => String(e.OUTBOX_ID)),
    );
  });

  it("delete cascade: a child in processing (P) stops the whole delete", async () => {
    const { custId, addrIds } = await customerWithAddresses(2);
    await anna.patch(`/api/v4/core/ADDR/${addrIds[1]}?source=anag-2`, { data: { TREC: "P" } });
    const before = await snapshot(t.services);
    const res = await anna.delete(`/api/v4/core/CUST/${custId}?source=anag-1`);
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ code: "INVALID_STATE_TRANSITION" });
    expect(res.body.message).toContain(`ADDR ${addrIds[1]}`);
    expect(await snapshot(t.services)).toEqual(before);
  });

  it("delete cascade of the sample: cancelling an order cancels its lines", async () => {
    const ord = await anna.post("/api/v4/core/ORD?source=sales-1", {
      data: { CUST_ID: 2, ORDL: [{ PROD_ID: "P0003", QTY: 2 }] },
    });
    const lineId = ord.body.data.ORDL[0].ORDL_ID;
    const res = await anna.delete(`/api/v4/core/ORD/${ord.body.data.ORD_ID}?source=sales-1`);
    expect(res.status).toBe(200);
    expect(await row(t.services, "TB_DOC_ORDL00", "ORDL_ID", lineId)).toMatchObject({ TREC: "C" });
  });

  it("update cascade on key change: children follow the new key, audited and evented", async () => {
    await anna.post("/api/v4/core/CITY?source=anag-3", {
      data: { CITY_ID: "OLD", NAME: "Oldtown", COUNTRY: "IT" },
    });
    const cust = await anna.post("/api/v4/core/CUST?source=anag-1", {
      data: { NAME: "Mover", CITY_ID: "OLD" },
    });
    const custId = cust.body.data.CUST_ID;
    const a = await anna.post("/api/v4/core/ADDR?source=anag-2", {
      data: { CUST_ID: custId, KIND: "B", CITY_ID: "OLD" },
    });
    const last = await lastOutboxId(t.services);
    const res = await anna.patch("/api/v4/core/CITY/OLD?source=anag-3", { data: { CITY_ID: "NEW" } });
    expect(res.status).toBe(200);
    expect(res.body.data.CITY_ID).toBe("NEW");
    expect(await row(t.services, "TB_ANAG_CUST00", "CUST_ID", custId)).toMatchObject({
      CITY_ID: "NEW",
      TREC: "M",
      LOWNER: "anna",
    });
    expect(await addr(a.body.data.ADDR_ID)).toMatchObject({ CITY_ID: "NEW", TREC: "M" });
    const events = await outboxRows(t.services, last);
    expect(events.map((e) => e.EVENT_TYPE)).toEqual(["CITYUpdated", "CUSTUpdated", "ADDRUpdated"]);
    expect(events[0]).toMatchObject({ AGGREGATE_ID: "NEW" });
    const taken = await anna.patch("/api/v4/core/CITY/NEW?source=anag-3", { data: { CITY_ID: "MI" } });
    expect(taken.status).toBe(409);
    expect(taken.body.code).toBe("DUPLICATE_KEY");
    // A key a path word would shadow (GET /CITY/export exports): refused, nothing changed.
    const shadowed = await anna.patch("/api/v4/core/CITY/NEW?source=anag-3", { data: { CITY_ID: "export" } });
    expect(shadowed.status).toBe(400);
    expect(shadowed.body).toMatchObject({ code: "INVALID_FIELD_VALUE", field: "CITY_ID" });
    expect(await row(t.services, "TB_ANAG_CUST00", "CUST_ID", custId)).toMatchObject({ CITY_ID: "NEW" });
  });
});

describe("a key change that would orphan records outside UPDATE_CASCADE", () => {
  let t: TestApp;
  let anna: Client;

  beforeAll(async () => {
    // CITY's key is modifiable; its changes reach CUST (UPDATE_CASCADE) but not ADDR.
    const fixture = await sampleFixtureWith((f) => {
      setRow(f.TB_DIM, { COD_DIM: "CITY" }, { UPDATE_CASCADE: "CUST" });
      setRow(f.TB_COST, { COD_DIM: "CITY", COD_VAR: "CITY_ID" }, { COD_ON_OFF: "LDRNM" });
    });
    t = await createTestApp("pglite", { fixture, env: NO_RATE_LIMITS });
    anna = await clientFor(t.app, "anna");
  });
  afterAll(async () => {
    await t?.close();
  });

  it("is 409 KEY_IN_USE naming them, and changes nothing; with none naming it, the key moves", async () => {
    await anna.post("/api/v4/core/CITY?source=anag-3", {
      data: { CITY_ID: "KEPT", NAME: "Kept", COUNTRY: "IT" },
    });
    const cust = await anna.post("/api/v4/core/CUST?source=anag-1", {
      data: { NAME: "Stays", CITY_ID: "KEPT" },
    });
    await anna.post("/api/v4/core/ADDR?source=anag-2", {
      data: { CUST_ID: cust.body.data.CUST_ID, KIND: "B", CITY_ID: "KEPT" },
    });
    const before = await snapshot(t.services);
    const res = await anna.patch("/api/v4/core/CITY/KEPT?source=anag-3", { data: { CITY_ID: "GONE" } });
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject({
      code: "KEY_IN_USE",
      field: "CITY_ID",
      details: { dimension: "ADDR", field: "CITY_ID", records: 1 },
    });
    expect(await snapshot(t.services)).toEqual(before);
    // Named by CUST only (which follows it): the change goes through, the customer with it.
    await anna.post("/api/v4/core/CITY?source=anag-3", {
      data: { CITY_ID: "FREE", NAME: "Free", COUNTRY: "IT" },
    });
    const mover = await anna.post("/api/v4/core/CUST?source=anag-1", {
      data: { NAME: "Mover", CITY_ID: "FREE" },
    });
    const moved = await anna.patch("/api/v4/core/CITY/FREE?source=anag-3", { data: { CITY_ID: "NEWFREE" } });
    expect(moved.status).toBe(200);
    expect(await row(t.services, "TB_ANAG_CUST00", "CUST_ID", mover.body.data.CUST_ID)).toMatchObject({
      CITY_ID: "NEWFREE",
    });
  });

  it("a force delete of a record named outside CASCADE_DELETE is 409 KEY_IN_USE and deletes nothing; a soft delete goes", async () => {
    await anna.post("/api/v4/core/CITY?source=anag-3", {
      data: { CITY_ID: "NAMED", NAME: "Named", COUNTRY: "IT" },
    });
    await anna.post("/api/v4/core/CUST?source=anag-1", { data: { NAME: "Names it", CITY_ID: "NAMED" } });
    const before = await snapshot(t.services);
    const res = await anna.delete("/api/v4/core/CITY/NAMED?source=anag-3&force=true");
    expect(res.status).toBe(409);
    expect(res.body).toEqual({
      error: "Conflict",
      code: "KEY_IN_USE",
      status: 409,
      field: "CITY_ID",
      message:
        'CITY.CITY_ID "NAMED" is named by 1 CUST record(s) (CITY_ID), which CITY does not delete with it (CASCADE_DELETE). Nothing was deleted: delete it without force (a cancelled record stays for them to name), point those records elsewhere first, or list CUST in CITY\'s CASCADE_DELETE.',
      details: { dimension: "CUST", field: "CITY_ID", records: 1 },
    });
    expect(await snapshot(t.services)).toEqual(before);
    expect(await row(t.services, "TB_ANAG_CITY00", "CITY_ID", "NAMED")).toBeDefined();
    // A soft delete keeps the record for them: it goes through.
    expect((await anna.delete("/api/v4/core/CITY/NAMED?source=anag-3")).status).toBe(200);
    // Named by nobody, a force delete removes it.
    await anna.post("/api/v4/core/CITY?source=anag-3", {
      data: { CITY_ID: "LONE", NAME: "Lone", COUNTRY: "IT" },
    });
    expect((await anna.delete("/api/v4/core/CITY/LONE?source=anag-3&force=true")).status).toBe(200);
    expect(await row(t.services, "TB_ANAG_CITY00", "CITY_ID", "LONE")).toBeUndefined();
  });
});
