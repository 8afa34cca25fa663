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
    expect(low.body).toMatchObject({ code: "INSUFFICIENT_PERMISSIONS", required_grant: "metadata" });
  });
  it("COD_UTENTE is a peso level (1, 2, 3) or null: anything else is 400 INVALID_METADATA naming it", async () => {
    const weight = async () =>
      (
        await t.services.db.query<{ COD_UTENTE: number | null }>(
          `SELECT "COD_UTENTE" FROM "TB_COST" WHERE "COD_DIM" = 'CUST' AND "NUM_COST" = 6`,
        )
      ).rows[0]!.COD_UTENTE;
    const v0 = await version();
    for (const w of [7, 4, 0, -1]) {
      const res = await anna.patch(`/api/v4/core/COST/CUST/6${Q}`, { data: { COD_UTENTE: w } });
      expect(res.status, String(w)).toBe(400);
      expect(res.body, String(w)).toMatchObject({
        error: "ValidationError",
        code: "INVALID_METADATA",
        status: 400,
        errors: [
          {
            field: expect.stringMatching(/^TB_COST\[\d+\]\.COD_UTENTE$/),
            message: `${w} is no peso level: give 1 (admin), 2 (manager) or 3 (user) for a field seen by that peso and the lower ones, or null for no weight (CUST.CREDIT_LIMIT)`,
          },
        ],
      });
    }
    const created = await anna.post(`/api/v4/core/COST${Q}`, {
      data: {
        COD_DIM: "CUST",
        NUM_COST: 40,
        COD_VAR: "VIP",
        COD_ON_OFF: "LD",
        COD_UTENTE: 9,
        CENTER_DETT: "nuovo",
      },
    });
    expect(created.status).toBe(400);
    expect(created.body).toMatchObject({
      code: "INVALID_METADATA",
      errors: [
        {
          field: expect.stringMatching(/^TB_COST\[\d+\]\.COD_UTENTE$/),
          message: expect.stringMatching(/^9 is no peso level: .*\(CUST\.VIP\)$/),
        },
      ],
    });
    expect(await weight()).toBe(2);
    expect(await version()).toBe(v0);
    // Each level, and no weight, is taken.
    for (const w of [3, 1, null, 2]) {
      const res = await anna.patch(`/api/v4/core/COST/CUST/6${Q}`, { data: { COD_UTENTE: w } });
      expect(res.status, String(w)).toBe(200);
      expect(await weight()).toBe(w);
    }
  });

  it("two fields of a dimension may not share a NUM_VAR (it orders them): 400 INVALID_METADATA naming both", async () => {
    const v0 = await version();
    const added = await anna.post(`/api/v4/core/VAR${Q}`, {
      data: { COD_DIM: "CUST", NUM_VAR: 3, COD_VAR: "NICK", DATA_TYPE: "STRING", LENGTH: 10 },
    });
    expect(added.status).toBe(400);
    expect(added.body).toMatchObject({
      error: "ValidationError",
      code: "INVALID_METADATA",
      status: 400,
      errors: [
        {
          field: expect.stringMatching(/^TB_VAR\[\d+\]\.NUM_VAR$/),
          message:
            "CUST.NAME and CUST.NICK both have NUM_VAR 3; NUM_VAR orders a dimension's fields, so each field needs its own",
        },
      ],
    });
    expect(await columns("TB_ANAG_CUST00")).not.toContain("NICK");
    const moved = await anna.patch(`/api/v4/core/VAR/CUST/EMAIL${Q}`, { data: { NUM_VAR: 3 } });
    expect(moved.status).toBe(400);
    expect(moved.body).toMatchObject({
      code: "INVALID_METADATA",
      errors: [
        expect.objectContaining({
          field: expect.stringContaining("NUM_VAR"),
          message: expect.stringMatching(/^CUST\.(EMAIL|NAME) and CUST\.(EMAIL|NAME) both have NUM_VAR 3;/),
        }),
      ],
    });
    const dim = await anna.post(`/api/v4/core/DIM${Q}`, {
      data: { COD_DIM: "TWINS", TABLE_NAME: "TB_ANAG_TWINS00", ID_FIELD: "TWINS_ID" },
      fields: [
        { NUM_VAR: 2, COD_VAR: "LEFT_ONE", DATA_TYPE: "STRING", LENGTH: 10 },
        { NUM_VAR: 2, COD_VAR: "RIGHT_ONE", DATA_TYPE: "STRING", LENGTH: 10 },
      ],
    });
    expect(dim.status).toBe(400);
    expect(dim.body).toMatchObject({
      code: "INVALID_METADATA",
      errors: [
        expect.objectContaining({
          message: expect.stringContaining("TWINS.LEFT_ONE and TWINS.RIGHT_ONE both have NUM_VAR 2"),
        }),
      ],
    });
    expect(await version()).toBe(v0);
    // The id field a new dimension is given takes a NUM_VAR of its own, before the fields given.
    const made = await anna.post(`/api/v4/core/DIM${Q}`, {
      data: { COD_DIM: "NUMBERED", TABLE_NAME: "TB_ANAG_NUMBERED00", ID_FIELD: "NUMBERED_ID" },
      fields: [
        { NUM_VAR: 0, COD_VAR: "ZERO", DATA_TYPE: "STRING", LENGTH: 10 },
        { NUM_VAR: 1, COD_VAR: "ONE", DATA_TYPE: "STRING", LENGTH: 10 },
      ],
    });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    const { rows } = await t.services.db.query<{ COD_VAR: string; NUM_VAR: number }>(
      `SELECT "COD_VAR", "NUM_VAR" FROM "TB_VAR" WHERE "COD_DIM" = 'NUMBERED' ORDER BY "NUM_VAR"`,
    );
    expect(rows.map((r) => [r.COD_VAR, Number(r.NUM_VAR)])).toEqual([
      ["NUMBERED_ID", -1],
      ["ZERO", 0],
      ["ONE", 1],
    ]);
    expect((await anna.delete(`/api/v4/core/DIM/NUMBERED${Q}`)).status).toBe(200);
  });

  it("ROW_SCOPE is stored in its one spelling: keys trimmed and lower-cased, as they are defined", async () => {
    const dim = await anna.post(`/api/v4/core/DIM${Q}`, {
      data: {
        COD_DIM: "SCOPED",
        TABLE_NAME: "TB_ANAG_SCOPED00",
        ID_FIELD: "SCOPED_ID",
        ROW_SCOPE: " Centro_Dett , OWNER ",
      },
      fields: [{ NUM_VAR: 2, COD_VAR: "LABEL", DATA_TYPE: "STRING", LENGTH: 10 }],
    });
    expect(dim.status, JSON.stringify(dim.body)).toBe(201);
    expect(dim.body.data.ROW_SCOPE).toBe("centro_dett,owner");
    const stored = async () =>
      (
        await t.services.db.query<{ ROW_SCOPE: string | null }>(
          `SELECT "ROW_SCOPE" FROM "TB_DIM" WHERE "COD_DIM" = 'SCOPED'`,
        )
      ).rows[0]!.ROW_SCOPE;
    expect(await stored()).toBe("centro_dett,owner");
    expect(
      t.services.metadata
        .current()
        .dimensions.get("SCOPED")!
        .rowScope.map((k) => k.key),
    ).toEqual(["centro_dett", "owner"]);
    const patched = await anna.patch(`/api/v4/core/DIM/SCOPED${Q}`, {
      data: { ROW_SCOPE: "Centro_Dett,,OWNER" },
    });
    expect(patched.status).toBe(200);
    expect(patched.body.data.ROW_SCOPE).toBe("centro_dett,owner");
    // Still refused as before: a key named twice in any spelling, an unknown key, none at all.
    const refusals: Array<[string, string]> = [
      ["owner,OWNER", "names owner twice"],
      ["Centro_Dett,Region", '"region" is not a scope key'],
      [" , ", "names no scope key"],
    ];
    for (const [value, message] of refusals) {
      const res = await anna.patch(`/api/v4/core/DIM/SCOPED${Q}`, { data: { ROW_SCOPE: value } });
      expect(res.status, value).toBe(400);
      expect(res.body, value).toMatchObject({
        code: "INVALID_METADATA",
        errors: [
          {
            field: expect.stringMatching(/^TB_DIM\[\d+\]\.ROW_SCOPE$/),
            message: expect.stringContaining(message),
          },
        ],
      });
    }
    expect(await stored()).toBe("centro_dett,owner");
    expect((await anna.delete(`/api/v4/core/DIM/SCOPED${Q}`)).status).toBe(200);
  });
});

describe.each(BACKENDS)("metadata writes that reshape tables (%s)", (backend) => {
  let t: TestApp;
  let anna: Client;
  let greta: Client;
  const Q = "?source=erp";

  beforeAll(async () => {
    t = await createTestApp(backend, { fixture: "sample", env: NO_RATE_LIMITS });
    [anna, greta] = await Promise.all([clientFor(t.app, "anna"), clientFor(t.app, "greta")]);
  });
  afterAll(async () => {
    await t?.close();
  });

  async function rows<R = Record<string, unknown>>(sql: string, params: unknown[] = []): Promise<R[]> {
    return (await t.services.db.query<R>(sql, params)).rows;
  }
  async function column(table: string, name: string) {
    const [col] = await rows<{
      data_type: string;
      character_maximum_length: number | null;
      is_identity: string;
    }>(
      `SELECT data_type, character_maximum_length, is_identity FROM information_schema.columns
        WHERE table_schema = current_schema() AND table_name = $1 AND column_name = $2`,
      [table, name],
    );
    return col;
  }
  async function primaryKey(table: string): Promise<{ name: string; columns: string[] } | null> {
    const res = await rows<{ conname: string; attname: string }>(
      `SELECT con.conname, a.attname FROM pg_constraint con
         JOIN pg_class c ON c.oid = con.conrelid
         JOIN pg_namespace n ON n.oid = c.relnamespace
         JOIN LATERAL unnest(con.conkey) WITH ORDINALITY AS k(attnum, ord) ON true
         JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum
        WHERE con.contype = 'p' AND c.relname = $1 AND n.nspname = current_schema() ORDER BY k.ord`,
      [table],
    );
    return res.length ? { name: res[0]!.conname, columns: res.map((r) => r.attname) } : null;
  }
  /** Relations named `prefix…`, but for those ending in `except`. */
  async function relations(prefix: string, except?: string): Promise<string[]> {
    const res = await rows<{ relname: string }>(
      `SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = current_schema() AND starts_with(c.relname, $1) ORDER BY c.relname`,
      [prefix],
    );
    return res.map((r) => r.relname).filter((name) => !except || !name.endsWith(except));
  }
  async function dimRow(code: string) {
    return (await rows(`SELECT * FROM "TB_DIM" WHERE "COD_DIM" = $1`, [code]))[0];
  }
  async function varRow(dim: string, code: string) {
    return (await rows(`SELECT * FROM "TB_VAR" WHERE "COD_DIM" = $1 AND "COD_VAR" = $2`, [dim, code]))[0];
  }

  it("POST /DIM refuses a fields row of another dimension (400 naming it); nothing is written", async () => {
    const res = await anna.post(`/api/v4/core/DIM${Q}`, {
      data: { COD_DIM: "NEWD", TABLE_NAME: "TB_NEWD00", ID_FIELD: "NEWD_ID" },
      fields: [
        { NUM_VAR: 2, COD_VAR: "LABEL", DATA_TYPE: "STRING", LENGTH: 10 },
        { COD_DIM: "CUST", NUM_VAR: 50, COD_VAR: "EXTRA", DATA_TYPE: "STRING", LENGTH: 10 },
      ],
    });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ code: "INVALID_FIELD_VALUE", field: "fields[1].COD_DIM" });
    expect(res.body.message).toContain("CUST");
    expect(await dimRow("NEWD")).toBeUndefined();
    expect(await varRow("CUST", "EXTRA")).toBeUndefined();
    expect(await relations("TB_NEWD00")).toEqual([]);
    expect((await anna.get("/api/v4/core/CUST/1?source=anag-1")).status).toBe(200);
    // The row's own COD_DIM may be repeated.
    const ok = await anna.post(`/api/v4/core/DIM${Q}`, {
      data: { COD_DIM: "NEWD", TABLE_NAME: "TB_NEWD00", ID_FIELD: "NEWD_ID" },
      fields: [{ COD_DIM: "NEWD", NUM_VAR: 2, COD_VAR: "LABEL", DATA_TYPE: "STRING", LENGTH: 10 }],
    });
    expect(ok.status, JSON.stringify(ok.body)).toBe(201);
    expect(await column("TB_NEWD00", "LABEL")).toMatchObject({ character_maximum_length: 10 });
  });

  it("a STRING id of 150 characters is created, with its outbox row (AGGREGATE_ID is TEXT)", async () => {
    const dim = await anna.post(`/api/v4/core/DIM${Q}`, {
      data: { COD_DIM: "LONGK", TABLE_NAME: "TB_LONGK00", ID_FIELD: "K" },
      fields: [{ NUM_VAR: 1, COD_VAR: "K", DATA_TYPE: "STRING" }],
    });
    expect(dim.status).toBe(201);
    const id = "k".repeat(150);
    const created = await anna.post(`/api/v4/core/LONGK${Q}`, { data: { K: id } });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(created.body.data.K).toBe(id);
    const [event] = await rows<{ AGGREGATE_ID: string; EVENT_TYPE: string }>(
      `SELECT "AGGREGATE_ID", "EVENT_TYPE" FROM "TB_ANAG_OUTBOX00" WHERE "OUTBOX_ID" = $1`,
      [created.body.event_id],
    );
    expect(event).toEqual({ AGGREGATE_ID: id, EVENT_TYPE: "LONGKCreated" });
    expect(await rows(`SELECT "K" FROM "TB_LONGK00" WHERE "K" = $1`, [id])).toEqual([{ K: id }]);
  });

  it("changing ID_FIELD moves the primary key of an empty table; refused (409) once it holds rows", async () => {
    const dim = await anna.post(`/api/v4/core/DIM${Q}`, {
      data: { COD_DIM: "KEYX", TABLE_NAME: "TB_KEYX00", ID_FIELD: "K_ID" },
      fields: [
        { NUM_VAR: 1, COD_VAR: "K_ID", DATA_TYPE: "INTEGER" },
        { NUM_VAR: 2, COD_VAR: "CODE", DATA_TYPE: "STRING", LENGTH: 10 },
      ],
    });
    expect(dim.status).toBe(201);
    expect(await primaryKey("TB_KEYX00")).toEqual({ name: "TB_KEYX00_pk", columns: ["TENANT_ID", "K_ID"] });
    const moved = await anna.patch(`/api/v4/core/DIM/KEYX${Q}`, { data: { ID_FIELD: "CODE" } });
    expect(moved.status, JSON.stringify(moved.body)).toBe(200);
    expect(await primaryKey("TB_KEYX00")).toEqual({ name: "TB_KEYX00_pk", columns: ["TENANT_ID", "CODE"] });
    expect(await column("TB_KEYX00", "K_ID")).toMatchObject({ is_identity: "NO" });
    expect((await anna.post(`/api/v4/core/KEYX${Q}`, { data: { CODE: "a" } })).status).toBe(201);
    const twice = await anna.post(`/api/v4/core/KEYX${Q}`, { data: { CODE: "a" } });
    expect(twice.status).toBe(409);
    expect(twice.body.code).toBe("DUPLICATE_KEY");

    const back = await anna.patch(`/api/v4/core/DIM/KEYX${Q}`, { data: { ID_FIELD: "K_ID" } });
    expect(back.status).toBe(409);
    expect(back.body.code).toBe("UNSAFE_SCHEMA_CHANGE");
    expect(back.body.errors).toContainEqual({
      field: "KEYX.K_ID",
      message: expect.stringContaining("changing the id field of a table that holds rows"),
    });
    expect(await dimRow("KEYX")).toMatchObject({ ID_FIELD: "CODE" });
    expect(await primaryKey("TB_KEYX00")).toEqual({ name: "TB_KEYX00_pk", columns: ["TENANT_ID", "CODE"] });

    // The sample's CUST holds rows: its id (and its generated numbering) stays.
    const cust = await anna.patch(`/api/v4/core/DIM/CUST${Q}`, { data: { ID_FIELD: "CODE" } });
    expect(cust.status).toBe(409);
    expect(cust.body.code).toBe("UNSAFE_SCHEMA_CHANGE");
    expect(await primaryKey("TB_ANAG_CUST00")).toMatchObject({ columns: ["TENANT_ID", "CUST_ID"] });
    expect(await column("TB_ANAG_CUST00", "CUST_ID")).toMatchObject({ is_identity: "YES" });
    expect((await anna.post("/api/v4/core/CUST?source=anag-1", { data: { NAME: "Next" } })).status).toBe(201);
  });

  it("changing TABLE_NAME is refused while the table holds rows, and renames an empty one", async () => {
    const refused = await anna.patch(`/api/v4/core/DIM/CITY${Q}`, { data: { TABLE_NAME: "TB_ANAG_CITY01" } });
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({
      code: "UNSAFE_SCHEMA_CHANGE",
      errors: [{ field: "CITY.TABLE_NAME", message: expect.stringContaining("holds rows") }],
    });
    expect(await dimRow("CITY")).toMatchObject({ TABLE_NAME: "TB_ANAG_CITY00" });
    expect(await relations("TB_ANAG_CITY01")).toEqual([]);
    expect((await anna.get("/api/v4/core/CITY/MI?source=anag-3")).status).toBe(200);

    await anna.post(`/api/v4/core/DIM${Q}`, {
      data: { COD_DIM: "MOVE", TABLE_NAME: "TB_MOVE00", ID_FIELD: "MOVE_ID" },
      fields: [
        {
          NUM_VAR: 2,
          COD_VAR: "CITY_ID",
          DATA_TYPE: "STRING",
          LENGTH: 10,
          TIPO_CAMPO: "AC",
          TIPO_VAR: "CITY",
        },
      ],
    });
    // (The identity's sequence keeps its name: it belongs to the column, wherever the table goes.)
    expect(await relations("TB_MOVE00", "_seq")).toEqual([
      "TB_MOVE00",
      "TB_MOVE00_CITY_ID_MOVE_ID_idx",
      "TB_MOVE00_pk",
    ]);
    const renamed = await anna.patch(`/api/v4/core/DIM/MOVE${Q}`, { data: { TABLE_NAME: "TB_MOVE01" } });
    expect(renamed.status, JSON.stringify(renamed.body)).toBe(200);
    expect(await relations("TB_MOVE00", "_seq")).toEqual([]);
    expect(await relations("TB_MOVE01")).toEqual([
      "TB_MOVE01",
      "TB_MOVE01_CITY_ID_MOVE_ID_idx",
      "TB_MOVE01_pk",
    ]);
    const rec = await anna.post(`/api/v4/core/MOVE${Q}`, { data: { CITY_ID: "MI" } });
    expect(rec.status, JSON.stringify(rec.body)).toBe(201);
    expect(await rows(`SELECT "MOVE_ID", "CITY_ID" FROM "TB_MOVE01"`)).toEqual([
      { MOVE_ID: 1, CITY_ID: "MI" },
    ]);
    // The old names are free again: another dimension can take the old table name.
    const reuse = await anna.post(`/api/v4/core/DIM${Q}`, {
      data: { COD_DIM: "MOVE2", TABLE_NAME: "TB_MOVE00", ID_FIELD: "M2_ID" },
      fields: [
        {
          NUM_VAR: 2,
          COD_VAR: "CITY_ID",
          DATA_TYPE: "STRING",
          LENGTH: 10,
          TIPO_CAMPO: "AC",
          TIPO_VAR: "CITY",
        },
      ],
    });
    expect(reuse.status, JSON.stringify(reuse.body)).toBe(201);
    expect(await primaryKey("TB_MOVE00")).toEqual({ name: "TB_MOVE00_pk", columns: ["TENANT_ID", "M2_ID"] });
    // Moving onto a table that exists is refused.
    const onto = await anna.patch(`/api/v4/core/DIM/MOVE2${Q}`, { data: { TABLE_NAME: "TB_MOVE01" } });
    expect(onto.status).toBe(400); // two dimensions on one table: invalid metadata
  });

  it("a DATA_TYPE change of a column holding values is refused (409), of an empty one applied", async () => {
    const date = await anna.patch(`/api/v4/core/VAR/CITY/COUNTRY${Q}`, { data: { DATA_TYPE: "DATE" } });
    expect(date.status).toBe(409);
    expect(date.body).toMatchObject({
      code: "UNSAFE_SCHEMA_CHANGE",
      errors: [{ field: "CITY.COUNTRY", message: expect.stringContaining("from STRING to DATE") }],
    });
    expect(await varRow("CITY", "COUNTRY")).toMatchObject({ DATA_TYPE: "STRING" });
    expect(await column("TB_ANAG_CITY00", "COUNTRY")).toMatchObject({ character_maximum_length: 2 });
    expect(
      await rows(`SELECT "COUNTRY" FROM "TB_ANAG_CITY00" WHERE "CITY_ID" = 'MI' AND "TENANT_ID" = 'acme'`),
    ).toEqual([{ COUNTRY: "IT" }]);
    const media = await anna.patch(`/api/v4/core/VAR/PROD/SPECS${Q}`, { data: { DATA_TYPE: "MEDIA" } });
    expect(media.status).toBe(409);
    expect(media.body.errors).toEqual([
      { field: "PROD.SPECS", message: expect.stringContaining("JSON to MEDIA") },
    ]);
    // A synonym is the same type: accepted on a populated column.
    expect(
      (await anna.patch(`/api/v4/core/VAR/CITY/COUNTRY${Q}`, { data: { DATA_TYPE: "varchar" } })).status,
    ).toBe(200);
    // An empty column may change type.
    await anna.post(`/api/v4/core/VAR${Q}`, {
      data: { COD_DIM: "CITY", NUM_VAR: 9, COD_VAR: "FOUNDED", DATA_TYPE: "STRING", LENGTH: 20 },
    });
    const empty = await anna.patch(`/api/v4/core/VAR/CITY/FOUNDED${Q}`, { data: { DATA_TYPE: "DATE" } });
    expect(empty.status, JSON.stringify(empty.body)).toBe(200);
    expect(await column("TB_ANAG_CITY00", "FOUNDED")).toMatchObject({ character_maximum_length: 8 });
  });

  it("TABLE_NAME may not be a pg_ name nor an existing relation other than the dimension's table", async () => {
    for (const name of ["pg_class", "PG_authid"]) {
      const res = await anna.post(`/api/v4/core/DIM${Q}`, {
        data: { COD_DIM: "PGX", TABLE_NAME: name, ID_FIELD: "K" },
        fields: [{ NUM_VAR: 1, COD_VAR: "K", DATA_TYPE: "STRING", LENGTH: 10 }],
      });
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({
        code: "RESERVED_NAME",
        errors: [expect.objectContaining({ message: expect.stringContaining("pg_") })],
      });
    }
    await t.services.db.query(`CREATE TABLE "LEGACY_T" ("X" INTEGER)`);
    await t.services.db.query(`CREATE SEQUENCE "TB_SEQX00_pk"`);
    const cases: Array<[string, string]> = [
      ["TB_ANAG_CUST00_pk", "index"],
      ["TB_ANAG_CUST00_CUST_ID_seq", "sequence"],
      ["LEGACY_T", "not a dimension table"],
      ["TB_SEQX00", "TB_SEQX00_pk"],
    ];
    for (const [name, says] of cases) {
      const res = await anna.post(`/api/v4/core/DIM${Q}`, {
        data: { COD_DIM: "PKX", TABLE_NAME: name, ID_FIELD: "K" },
        fields: [{ NUM_VAR: 1, COD_VAR: "K", DATA_TYPE: "STRING", LENGTH: 10 }],
      });
      expect(res.status, name).toBe(409);
      expect(res.body).toMatchObject({
        code: "UNSAFE_SCHEMA_CHANGE",
        errors: [{ field: "PKX.TABLE_NAME", message: expect.stringContaining(says) }],
      });
      expect(await dimRow("PKX")).toBeUndefined();
    }
    expect(await column("LEGACY_T", "K")).toBeUndefined();
    expect((await anna.get("/api/v4/core/CUST/1?source=anag-1")).status).toBe(200);
    // A dimension deleted and created again takes its kept table (and data) back.
    await anna.post(`/api/v4/core/DIM${Q}`, {
      data: { COD_DIM: "BACK", TABLE_NAME: "TB_BACK00", ID_FIELD: "B_ID" },
      fields: [{ NUM_VAR: 1, COD_VAR: "B_ID", DATA_TYPE: "STRING", LENGTH: 10 }],
    });
    expect((await anna.post(`/api/v4/core/BACK${Q}`, { data: { B_ID: "b1" } })).status).toBe(201);
    expect((await anna.delete(`/api/v4/core/DIM/BACK${Q}`)).status).toBe(200);
    const again = await anna.post(`/api/v4/core/DIM${Q}`, {
      data: { COD_DIM: "BACK", TABLE_NAME: "TB_BACK00", ID_FIELD: "B_ID" },
      fields: [{ NUM_VAR: 1, COD_VAR: "B_ID", DATA_TYPE: "STRING", LENGTH: 10 }],
    });
    expect(again.status, JSON.stringify(again.body)).toBe(201);
    expect((await anna.get(`/api/v4/core/BACK/b1${Q}`)).status).toBe(200);
  });

  it("METADATA_IN_USE names only the caller's tenant's users; another tenant's admin may not try", async () => {
    const other = await greta.delete(`/api/v4/core/MENU/anag${Q}`);
    expect(other.status).toBe(403);
    expect(other.body).toMatchObject({ code: "INSUFFICIENT_PERMISSIONS", required_grant: "metadata" });
    expect(JSON.stringify(other.body)).not.toContain("marco");
    const own = await anna.delete(`/api/v4/core/MENU/anag${Q}`);
    expect(own.body).toMatchObject({ code: "METADATA_IN_USE", details: { users: ["marco"], user_count: 1 } });
  });
});
