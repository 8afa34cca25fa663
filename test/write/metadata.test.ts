// HTTP: metadata writes (DIM, VAR, COST, OBJECT, MENU, SORT; level 4): validated like fixtures,
// tables synced, version bumped, evented, and visible to the next request.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";
import { lastOutboxId, outboxRows } from "./helpers.ts";
import { type Client, clientFor, NO_RATE_LIMITS } from "./http.ts";

describe.each(BACKENDS)("metadata writes over HTTP (%s)", (backend) => {
  let t: TestApp;
  let anna: Client;
  let marco: Client;
  const Q = "?source=erp";

  beforeAll(async () => {
    t = await createTestApp(backend, { fixture: "sample", env: NO_RATE_LIMITS });
    [anna, marco] = await Promise.all([clientFor(t.app, "anna"), clientFor(t.app, "marco")]);
  });
  afterAll(async () => {
    await t?.close();
  });

  async function columns(table: string): Promise<string[]> {
    const res = await t.services.db.query<{ column_name: string }>(
      "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1",
      [table],
    );
    return res.rows.map((r) => r.column_name);
  }
  async function version(): Promise<number> {
    const res = await t.services.db.query<{ VERSION: number }>(`SELECT "VERSION" FROM "TB_META_STATE"`);
    return Number(res.rows[0]!.VERSION);
  }

  it("adding a field (POST VAR) alters the table and is usable on the next request", async () => {
    const last = await lastOutboxId(t.services);
    const v0 = await version();
    const res = await anna.post(`/api/v4/core/VAR${Q}`, {
      data: {
        COD_DIM: "CUST",
        NUM_VAR: 20,
        COD_VAR: "PHONE",
        DESC_VAR: "Phone",
        DATA_TYPE: "STRING",
        LENGTH: 20,
      },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body).toMatchObject({
      data: { COD_DIM: "CUST", COD_VAR: "PHONE", DATA_TYPE: "STRING", LENGTH: 20, NULLABLE: true },
      event_id: expect.any(String),
      version: v0 + 1,
    });
    expect(await version()).toBe(v0 + 1);
    expect(await columns("TB_ANAG_CUST00")).toContain("PHONE");
    const [event] = await outboxRows(t.services, last);
    expect(event).toMatchObject({
      EVENT_TYPE: "VARCreated",
      AGGREGATE_TYPE: "VAR",
      AGGREGATE_ID: "CUST/PHONE",
    });

    const created = await anna.post("/api/v4/core/CUST?source=anag-1", {
      data: { NAME: "Phone Srl", PHONE: "+39 02 1" },
    });
    expect(created.status).toBe(201);
    expect(created.body.data.PHONE).toBe("+39 02 1");
    const read = await anna.get(`/api/v4/core/CUST/${created.body.data.CUST_ID}?source=anag-1`);
    expect(read.status).toBe(200);
    expect(JSON.stringify(read.body)).toContain("+39 02 1");
    const tooLong = await anna.post("/api/v4/core/CUST?source=anag-1", {
      data: { NAME: "P", PHONE: "1".repeat(21) },
    });
    expect(tooLong.body).toMatchObject({ code: "INVALID_FIELD_VALUE", field: "PHONE" });
  });

  it("a TB_COST row (POST, PATCH COST) changes the field rules at once", async () => {
    const post = await anna.post(`/api/v4/core/COST${Q}`, {
      data: { COD_DIM: "CUST", NUM_COST: 20, COD_VAR: "PHONE", COD_ON_OFF: "LDR", REQUIRED: false },
    });
    expect(post.status).toBe(201);
    const refused = await anna.post("/api/v4/core/CUST?source=anag-1", { data: { NAME: "P", PHONE: "1" } });
    expect(refused.body).toMatchObject({ code: "FIELD_NOT_ALLOWED_ON_CREATE", field: "PHONE" });
    const patch = await anna.patch(`/api/v4/core/COST/CUST/20${Q}`, {
      data: { COD_ON_OFF: "LDRNM", VALUE_TEMP: "{user}" },
    });
    expect(patch.status).toBe(200);
    expect(patch.body.data).toMatchObject({ COD_ON_OFF: "LDRNM", VALUE_TEMP: "{user}", COD_VAR: "PHONE" });
    const templated = await anna.post("/api/v4/core/CUST?source=anag-1", { data: { NAME: "P" } });
    expect(templated.body.data.PHONE).toBe("anna");
  });

  it("removing a field (DELETE VAR) drops an empty column with its TB_COST rows, refuses one holding values", async () => {
    const unsafe = await anna.delete(`/api/v4/core/VAR/CUST/PHONE${Q}`);
    expect(unsafe.status).toBe(409);
    expect(unsafe.body.code).toBe("UNSAFE_SCHEMA_CHANGE");
    expect(await columns("TB_ANAG_CUST00")).toContain("PHONE");
    expect(
      (await anna.post("/api/v4/core/CUST?source=anag-1", { data: { NAME: "still", PHONE: "2" } })).status,
    ).toBe(201);

    await anna.post(`/api/v4/core/VAR${Q}`, {
      data: { COD_DIM: "CUST", NUM_VAR: 21, COD_VAR: "FAX", DATA_TYPE: "STRING", LENGTH: 20 },
    });
    await anna.post(`/api/v4/core/COST${Q}`, {
      data: { COD_DIM: "CUST", NUM_COST: 21, COD_VAR: "FAX", COD_ON_OFF: "LD" },
    });
    const res = await anna.delete(`/api/v4/core/VAR/CUST/FAX${Q}`);
    expect(res.status).toBe(200);
    expect(res.body.related).toEqual([
      { code: "COST", key: "CUST/21", action: "deleted", event_id: expect.any(String) },
    ]);
    expect(await columns("TB_ANAG_CUST00")).not.toContain("FAX");
    const gone = await anna.post("/api/v4/core/CUST?source=anag-1", { data: { NAME: "x", FAX: "1" } });
    expect(gone.body).toMatchObject({ code: "INVALID_FIELD", field: "FAX" });
  });

  it("a new dimension (POST DIM with fields, POST MENU) can take records at once", async () => {
    const dim = await anna.post(`/api/v4/core/DIM${Q}`, {
      data: { COD_DIM: "NOTE", DESC_DIM: "Notes", TABLE_NAME: "TB_ANAG_NOTE00", ID_FIELD: "NOTE_ID" },
      fields: [{ NUM_VAR: 2, COD_VAR: "TEXT", DATA_TYPE: "TEXT", NULLABLE: false }],
    });
    expect(dim.status, JSON.stringify(dim.body)).toBe(201);
    expect(dim.body.related.map((r: { key: string }) => r.key)).toEqual(["NOTE/NOTE_ID", "NOTE/TEXT"]);
    expect(await columns("TB_ANAG_NOTE00")).toEqual(
      expect.arrayContaining(["NOTE_ID", "TEXT", "TREC", "TENANT_ID"]),
    );
    // No menu node serves NOTE yet: the grouping node erp may write it.
    const note = await anna.post("/api/v4/core/NOTE?source=erp", { data: { TEXT: "hello" } });
    expect(note.status, JSON.stringify(note.body)).toBe(201);
    expect(note.body.data).toMatchObject({ NOTE_ID: expect.any(Number), TEXT: "hello", TREC: "N" });
    const read = await anna.get(`/api/v4/core/DIM/NOTE${Q}`);
    expect(read.status, JSON.stringify(read.body)).toBe(200);
    expect(read.body.data).toMatchObject({ COD_DIM: "NOTE", ID_FIELD: "NOTE_ID" });
    const menu = await anna.post(`/api/v4/core/MENU${Q}`, {
      data: { COD_MENU: "notes-1", NLEFT: 25, NRIGHT: 26, DESC_MENU: "Notes", COD_DIM: "NOTE" },
    });
    expect(menu.status).toBe(201);
    // Now notes-1 serves it, and no grant of anna covers notes-1.
    expect((await anna.post("/api/v4/core/NOTE?source=erp", { data: { TEXT: "x" } })).status).toBe(403);
    expect((await anna.post("/api/v4/core/NOTE?source=notes-1", { data: { TEXT: "x" } })).status).toBe(403);
    // A DIM that others still refer to cannot go; one that nothing refers to can (its table stays).
    const inUse = await anna.delete(`/api/v4/core/DIM/NOTE${Q}`);
    expect(inUse.status).toBe(400);
    expect(inUse.body.code).toBe("INVALID_METADATA");
    expect((await anna.delete(`/api/v4/core/MENU/notes-1${Q}`)).status).toBe(200);
    const removed = await anna.delete(`/api/v4/core/DIM/NOTE${Q}`);
    expect(removed.status).toBe(200);
    expect(removed.body.related.map((r: { code: string }) => r.code)).toEqual(["VAR", "VAR"]);
    expect((await anna.post("/api/v4/core/NOTE?source=erp", { data: { TEXT: "x" } })).status).toBe(404);
  });

  it("PUT, PATCH and DELETE on SORT and OBJECT rows", async () => {
    const put = await anna.put(`/api/v4/core/SORT/CUST/by_name${Q}`, { data: { SORT_EXPR: "-NAME" } });
    expect(put.status).toBe(200);
    expect(put.body.data).toMatchObject({
      COD_DIM: "CUST",
      SORT_KEY: "by_name",
      SORT_EXPR: "-NAME",
      DESC_SORT: null,
    });
    const bad = await anna.patch(`/api/v4/core/SORT/CUST/by_name${Q}`, { data: { SORT_EXPR: "NOPE" } });
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({
      code: "INVALID_METADATA",
      errors: [expect.objectContaining({ field: expect.stringContaining("SORT_EXPR") })],
    });
    expect((await anna.delete(`/api/v4/core/SORT/CUST/by_name${Q}`)).status).toBe(200);
    expect((await anna.delete(`/api/v4/core/SORT/CUST/by_name${Q}`)).status).toBe(404);
    const rel = await anna.patch(`/api/v4/core/OBJECT/ADDR/CITY_ID${Q}`, { data: { REL_NAME: "town" } });
    expect(rel.status).toBe(200);
    expect(
      t.services.metadata
        .current()
        .dimensions.get("ADDR")!
        .relations.map((r) => r.name),
    ).toContain("town");
  });

  it("refuses invalid rows, unknown columns, duplicates, key changes, and callers below level 4", async () => {
    const invalid = await anna.post(`/api/v4/core/VAR${Q}`, {
      data: { COD_DIM: "CUST", NUM_VAR: 30, COD_VAR: "ODD", DATA_TYPE: "FOO" },
    });
    expect(invalid.status).toBe(400);
    expect(invalid.body).toMatchObject({
      code: "INVALID_METADATA",
      errors: [expect.objectContaining({ message: expect.stringContaining("FOO") })],
    });
    const unknown = await anna.post(`/api/v4/core/VAR${Q}`, {
      data: { COD_DIM: "CUST", NUM_VAR: 30, COD_VAR: "ODD", DATA_TYPE: "STRING", COLOUR: "red" },
    });
    expect(unknown.body).toMatchObject({ code: "INVALID_FIELD", field: "COLOUR" });
    const wrongType = await anna.post(`/api/v4/core/VAR${Q}`, {
      data: { COD_DIM: "CUST", NUM_VAR: "thirty", COD_VAR: "ODD", DATA_TYPE: "STRING" },
    });
    expect(wrongType.body).toMatchObject({ code: "INVALID_FIELD_VALUE", field: "NUM_VAR" });
    const tooLong = await anna.patch(`/api/v4/core/DIM/CUST${Q}`, { data: { DESC_DIM: "x".repeat(500) } });
    expect(tooLong.status).toBe(400);
    const duplicate = await anna.post(`/api/v4/core/MENU${Q}`, {
      data: { COD_MENU: "erp", NLEFT: 1, NRIGHT: 22 },
    });
    expect(duplicate.status).toBe(409);
    expect((await anna.put(`/api/v4/core/MENU/nope${Q}`, { data: { NLEFT: 40, NRIGHT: 41 } })).status).toBe(
      404,
    );
    const keyChange = await anna.patch(`/api/v4/core/DIM/CUST${Q}`, { data: { COD_DIM: "CLIENT" } });
    expect(keyChange.body).toMatchObject({ code: "INVALID_FIELD_VALUE", field: "COD_DIM" });
    const granted = await anna.delete(`/api/v4/core/MENU/anag-1${Q}`);
    expect(granted.status).toBe(409);
    expect(granted.body.code).toBe("METADATA_IN_USE");
    const low = await marco.post("/api/v4/core/VAR?source=anag", {
      data: { COD_DIM: "CUST", NUM_VAR: 31, COD_VAR: "LOW", DATA_TYPE: "STRING" },
    });
    expect(low.status).toBe(403);
    expect(low.body).toMatchObject({ code: "INSUFFICIENT_PERMISSIONS", required_grant: 4 });
  });
});
