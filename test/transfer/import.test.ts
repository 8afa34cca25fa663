// POST /api/v4/core/{dim}/import (decisions §20): CSV and NDJSON bodies through the write pipeline,
// create and upsert, atomic imports, the answer's counts and errors, and the body's refusals.
import { Readable } from "node:stream";
import { parse as parseCsv } from "csv-parse/sync";
import { stringify as stringifyCsv } from "csv-stringify/sync";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, loginAs } from "../helpers/auth.ts";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";
import { lastOutboxId, outboxRows, sampleFixtureWith, setRow, snapshot } from "../write/helpers.ts";
import { NO_RATE_LIMITS } from "../write/http.ts";

const MAX_BATCH = 20;
const ATOMIC_MAX = 50;
const MAX_BYTES = 4096;

describe.each(BACKENDS)("import (%s)", (backend) => {
  let t: TestApp;
  let anna: string;
  let lucia: string;

  beforeAll(async () => {
    // PROD.IMAGE (MEDIA) may be given on create (N): an exported product's image is then refused
    // by the create for itself (MEDIA_VALUE_NOT_ALLOWED), not only for want of the flag.
    const fixture = await sampleFixtureWith((f) =>
      setRow(f.TB_COST, { COD_DIM: "PROD", COD_VAR: "IMAGE" }, { COD_ON_OFF: "LDNM" }),
    );
    t = await createTestApp(backend, {
      fixture,
      env: {
        ...NO_RATE_LIMITS,
        MAX_BATCH_SIZE: String(MAX_BATCH),
        IMPORT_ATOMIC_MAX_ROWS: String(ATOMIC_MAX),
        IMPORT_MAX_BYTES: String(MAX_BYTES),
      },
    });
    [anna, lucia] = await Promise.all([
      loginAs(t.app, "anna", "anna-secret-1"),
      loginAs(t.app, "lucia", "lucia-secret-3"),
    ]);
  });
  afterAll(async () => {
    await t?.close();
  });

  const send = async (
    body: string | Buffer | Readable,
    type: string,
    query = "",
    token = anna,
    headers: Record<string, string> = {},
  ) => {
    const res = await t.app.inject({
      method: "POST",
      url: `/api/v4/core/CUST/import?source=anag-1${query}`,
      headers: { ...bearer(token), "content-type": type, ...headers },
      payload: body,
    });
    return { status: res.statusCode, body: res.json(), headers: res.headers };
  };
  /** An import into another dimension than CUST, through its own source. */
  const importInto = async (dim: string, source: string, body: string, type: string, query = "") => {
    const res = await t.app.inject({
      method: "POST",
      url: `/api/v4/core/${dim}/import?source=${source}${query}`,
      headers: { ...bearer(anna), "content-type": type },
      payload: body,
    });
    return { status: res.statusCode, body: res.json() };
  };
  const exportOf = async (dim: string, source: string, query = "") => {
    const res = await t.app.inject({
      method: "GET",
      url: `/api/v4/core/${dim}/export?source=${source}${query}`,
      headers: bearer(anna),
    });
    expect(res.statusCode).toBe(200);
    return res.body;
  };
  const csv = (body: string | Buffer, query = "") => send(body, "text/csv", query);
  const ndjson = (body: string, query = "") => send(body, "application/x-ndjson", query);
  const custNamed = async (prefix: string) =>
    (
      await t.services.db.query<Record<string, unknown>>(
        `SELECT * FROM "TB_ANAG_CUST00" WHERE "NAME" LIKE $1 ORDER BY "CUST_ID"`,
        [`${prefix}%`],
      )
    ).rows;

  it("creates CSV rows through the write pipeline: typed values, templates, one event per record", async () => {
    const last = await lastOutboxId(t.services);
    const res = await csv(
      'NAME,CITY_ID,CREDIT_LIMIT,VIP,EMAIL\r\nCsv One,MI,1200.5,true,\r\n"Csv Two, Ltd",,,false,""\r\n',
    );
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      data: { received: 2, created: 2, updated: 0, unchanged: 0, failed: 0, errors: [] },
    });
    const rows = await custNamed("Csv ");
    expect(rows).toMatchObject([
      {
        NAME: "Csv One",
        CITY_ID: "MI",
        CREDIT_LIMIT: 1200.5,
        VIP: true,
        EMAIL: null,
        OWNER: "anna",
        TREC: "N",
      },
      { NAME: "Csv Two, Ltd", CITY_ID: null, CREDIT_LIMIT: null, VIP: false, EMAIL: "" },
    ]);
    // The CODE template ran for each.
    expect(rows.map((r) => r.CODE)).toEqual([
      expect.stringMatching(/^C-\d{5}$/),
      expect.stringMatching(/^C-\d{5}$/),
    ]);
    const events = await outboxRows(t.services, last);
    expect(events.map((e) => [e.EVENT_TYPE, e.AGGREGATE_ID])).toEqual(
      rows.map((r) => ["CUSTCreated", String(r.CUST_ID)]),
    );
  });

  it("counts NDJSON rows and lists refused ones with their row, field and code", async () => {
    const body = [
      JSON.stringify({ NAME: "Nd One", VIP: true }),
      JSON.stringify({ EMAIL: "no-name@x.example" }),
      "",
      JSON.stringify({ NAME: "Nd Three", CITY_ID: "XX" }),
      "7",
      JSON.stringify({ NAME: "Nd Five", NOPE: 1 }),
      JSON.stringify({ NAME: "Nd Six", CREDIT_LIMIT: "much" }),
      JSON.stringify({ NAME: "Nd Seven" }),
    ].join("\n");
    const res = await ndjson(body);
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual({
      received: 7,
      created: 2,
      updated: 0,
      unchanged: 0,
      failed: 5,
      errors: [
        { row: 2, field: "NAME", code: "REQUIRED_FIELD_MISSING", message: expect.any(String) },
        { row: 4, field: "CITY_ID", code: "INVALID_FOREIGN_KEY", message: expect.any(String) },
        { row: 5, field: null, code: "INVALID_REQUEST", message: "Row 5 is not a JSON object." },
        { row: 6, field: "NOPE", code: "INVALID_FIELD", message: expect.any(String) },
        { row: 7, field: "CREDIT_LIMIT", code: "INVALID_FIELD_VALUE", message: expect.any(String) },
      ],
    });
    expect((await custNamed("Nd ")).map((r) => r.NAME)).toEqual(["Nd One", "Nd Seven"]);
  });

  it("writes in batches of MAX_BATCH_SIZE, the failures of one not stopping the next, and lists the first 100 errors", async () => {
    const last = await lastOutboxId(t.services);
    const lines = ["NAME,CITY_ID"];
    // 130 refused rows (an unknown city), every fifth row good: 163 rows, 9 batches of 20.
    for (let i = 0; i < 163; i++) lines.push(i % 5 === 0 ? `Many ${i},MI` : `Many ${i},XX`);
    const res = await csv(lines.join("\n"));
    expect(res.status).toBe(200);
    const { data } = res.body;
    expect(data).toMatchObject({ received: 163, created: 33, updated: 0, failed: 130 });
    expect(data.errors).toHaveLength(100);
    // The first 100 refused rows, in order: CSV rows count from the header (row 1).
    const refused = Array.from({ length: 163 }, (_, i) => i)
      .filter((i) => i % 5 !== 0)
      .map((i) => i + 2);
    expect(data.errors.map((e: { row: number }) => e.row)).toEqual(refused.slice(0, 100));
    expect(data.errors[0]).toMatchObject({ field: "CITY_ID", code: "INVALID_FOREIGN_KEY" });
    expect(await custNamed("Many ")).toHaveLength(33);
    expect(await outboxRows(t.services, last)).toHaveLength(33);
  });

  it("mode=upsert updates the records whose id exists and creates the others", async () => {
    const [first] = await custNamed("Csv One");
    const id = first!.CUST_ID;
    const last = await lastOutboxId(t.services);
    const res = await csv(
      `CUST_ID,NAME,CREDIT_LIMIT\n${id},Csv One renamed,\n,Upserted new,77\n`,
      "&mode=upsert",
    );
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual({
      received: 2,
      created: 1,
      updated: 1,
      unchanged: 0,
      failed: 0,
      errors: [],
    });
    const [renamed] = await custNamed("Csv One renamed");
    // An empty cell clears the field in an update.
    expect(renamed).toMatchObject({ CUST_ID: id, CREDIT_LIMIT: null, TREC: "M", LOWNER: "anna" });
    const [created] = await custNamed("Upserted new");
    expect(created).toMatchObject({ CREDIT_LIMIT: 77 });
    const events = await outboxRows(t.services, last);
    expect(events.map((e) => [e.EVENT_TYPE, e.AGGREGATE_ID])).toEqual([
      ["CUSTUpdated", String(id)],
      ["CUSTCreated", String(created!.CUST_ID)],
    ]);
  });

  it("mode=create refuses an id the database makes (FIELD_NOT_ALLOWED_ON_CREATE), per row", async () => {
    const res = await ndjson(`${JSON.stringify({ CUST_ID: 999, NAME: "With id" })}\n`);
    expect(res.body.data).toMatchObject({
      created: 0,
      failed: 1,
      errors: [{ row: 1, field: "CUST_ID", code: "FIELD_NOT_ALLOWED_ON_CREATE" }],
    });
  });

  it("atomic=true writes nothing when a row is refused, and lists every refused row", async () => {
    const before = await snapshot(t.services);
    const res = await csv("NAME,CITY_ID\nAtomic A,MI\nAtomic B,XX\nAtomic C,MI\n,MI\n", "&atomic=true");
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({
      code: "IMPORT_FAILED",
      status: 400,
      details: {
        received: 4,
        created: 0,
        updated: 0,
        failed: 2,
        errors: [
          { row: 3, field: "CITY_ID", code: "INVALID_FOREIGN_KEY" },
          { row: 5, field: "NAME", code: "REQUIRED_FIELD_MISSING" },
        ],
      },
    });
    expect(await snapshot(t.services)).toEqual(before);
  });

  it("atomic=true writes every row when none is refused", async () => {
    const res = await csv("NAME\nAll A\nAll B\n", "&atomic=true");
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ received: 2, created: 2, failed: 0 });
    expect(await custNamed("All ")).toHaveLength(2);
  });

  it("atomic=true takes at most IMPORT_ATOMIC_MAX_ROWS rows (413), writing none", async () => {
    const before = await snapshot(t.services);
    const rows = Array.from({ length: ATOMIC_MAX + 1 }, (_, i) => `Big ${i}`);
    const res = await csv(`NAME\n${rows.join("\n")}\n`, "&atomic=true");
    expect(res.status).toBe(413);
    expect(res.body).toMatchObject({ code: "PAYLOAD_TOO_LARGE", details: { max_rows: ATOMIC_MAX } });
    expect(await snapshot(t.services)).toEqual(before);
  });

  it("a malformed CSV line is 400 INVALID_CSV naming its row; with atomic=true nothing is written", async () => {
    const before = await snapshot(t.services);
    const res = await csv("NAME,CITY_ID\nBad A,MI\nBad B,MI,extra\nBad C,MI\n", "&atomic=true");
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({
      code: "INVALID_CSV",
      details: { row: 3, line: 3, received: 1, created: 0 },
    });
    expect(await snapshot(t.services)).toEqual(before);
    const quote = await csv('NAME\n"Open quote\n', "&atomic=true");
    expect(quote.status).toBe(400);
    expect(quote.body).toMatchObject({ code: "INVALID_CSV", details: { row: 2 } });
    // The parser's reason ends its sentence before the import's note.
    expect(quote.body.message).toMatch(/^Row 2 is not valid CSV: .*[^.]\. Nothing was written\.$/);
  });

  it("a malformed CSV line without atomic keeps the batches written before it and says so", async () => {
    const lines = ["NAME"];
    for (let i = 0; i < MAX_BATCH + 5; i++) lines.push(`Partial ${i}`);
    lines.push('"broken');
    const res = await csv(lines.join("\n"));
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({
      code: "INVALID_CSV",
      details: { row: MAX_BATCH + 7, created: MAX_BATCH },
    });
    expect(await custNamed("Partial ")).toHaveLength(MAX_BATCH);
  });

  it("bytes that are not UTF-8 are 400 INVALID_ENCODING naming their row", async () => {
    const before = await snapshot(t.services);
    const body = Buffer.concat([
      Buffer.from("NAME\nEnc A\nEnc "),
      Buffer.from([0xff, 0xfe]),
      Buffer.from("B\nEnc C\n"),
    ]);
    const res = await csv(body, "&atomic=true");
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ code: "INVALID_ENCODING", details: { row: 3 } });
    expect(await snapshot(t.services)).toEqual(before);
    const nd = await send(
      Buffer.concat([Buffer.from('{"NAME":"Enc D"}\n{"NAME":"'), Buffer.from([0xc3]), Buffer.from('"}\n')]),
      "application/x-ndjson",
      "&atomic=true",
    );
    expect(nd.body).toMatchObject({ code: "INVALID_ENCODING", details: { row: 2 } });
    expect(await snapshot(t.services)).toEqual(before);
  });

  it("an unknown CSV column is 400 INVALID_FIELD before any row is written", async () => {
    const before = await snapshot(t.services);
    const res = await csv("NAME,NOPE\nUnknown A,1\n");
    expect(res.status).toBe(400);
    // The header (row 1) names it, whatever the rows after it.
    expect(res.body).toMatchObject({ code: "INVALID_FIELD", field: "NOPE", details: { row: 1, created: 0 } });
    expect(await snapshot(t.services)).toEqual(before);
  });

  it("an NDJSON line that is not JSON is 400 INVALID_JSON naming its row", async () => {
    const res = await ndjson('{"NAME":"Json A"}\n{"NAME":\n', "&atomic=true");
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ code: "INVALID_JSON", details: { row: 2 } });
    expect(res.body.message).toMatch(/^Row 2 is not valid JSON: .*[^.]\. Nothing was written\.$/);
    expect(await custNamed("Json ")).toHaveLength(0);
  });

  it("a body over IMPORT_MAX_BYTES is 413: from its length before reading, or as it streams", async () => {
    const before = await snapshot(t.services);
    const big = `NAME\n${Array.from({ length: 600 }, (_, i) => `Large ${i}`).join("\n")}\n`;
    expect(Buffer.byteLength(big)).toBeGreaterThan(MAX_BYTES);
    const declared = await csv(big);
    expect(declared.status).toBe(413);
    expect(declared.body).toMatchObject({
      code: "PAYLOAD_TOO_LARGE",
      message: `An import body holds at most ${MAX_BYTES} bytes (IMPORT_MAX_BYTES); split the rows into several imports.`,
      details: { max_bytes: MAX_BYTES },
    });
    expect(declared.headers.connection).toBe("close");
    // Streamed without a length: refused once the count passes the bound; atomic: nothing written.
    const streamed = await send(Readable.from([Buffer.from(big)]), "text/csv", "&atomic=true");
    expect(streamed.status).toBe(413);
    expect(streamed.body).toMatchObject({ code: "PAYLOAD_TOO_LARGE" });
    expect(await snapshot(t.services)).toEqual(before);
  });

  it("other media types are 415; a caller without create is 403; bad parameters are 400", async () => {
    const json = await send(JSON.stringify({ data: [] }), "application/json");
    expect(json.status).toBe(415);
    expect(json.body.code).toBe("UNSUPPORTED_MEDIA_TYPE");
    const latin = await send("NAME\nx\n", "text/csv; charset=iso-8859-1");
    expect(latin.status).toBe(415);
    const denied = await send("NAME\nDenied\n", "text/csv", "", lucia);
    expect(denied.status).toBe(403);
    expect((await csv("NAME\nx\n", "&mode=merge")).body).toMatchObject({
      code: "INVALID_PARAMETER",
      field: "mode",
    });
    expect(await custNamed("Denied")).toHaveLength(0);
  });

  it("an exported CSV imports back (mode=upsert): the same records, unchanged", async () => {
    const exported = await t.app.inject({
      method: "GET",
      url: "/api/v4/core/CUST/export?source=anag-1&format=csv&$fields=CUST_ID,NAME,CITY_ID,CREDIT_LIMIT,VIP&filter[NAME][$like]=All%25",
      headers: bearer(anna),
    });
    expect(exported.statusCode).toBe(200);
    const res = await csv(exported.body, "&mode=upsert&atomic=true");
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ received: 2, created: 0, updated: 0, unchanged: 2, failed: 0 });
  });

  it("an export holding fields without M imports back (mode=upsert): equal values are left alone", async () => {
    // ORD: ORD_NO (LDR) and CUST_ID (LDRN) may not be modified; CUST: CODE (LDRN). Every listed
    // field is in the file.
    const orders = await exportOf("ORD", "sales-1");
    const rows = parseCsv(orders, { columns: true }) as Array<Record<string, string>>;
    expect(rows.length).toBeGreaterThan(1);
    expect(Object.keys(rows[0]!)).toEqual(expect.arrayContaining(["ORD_ID", "ORD_NO", "CUST_ID"]));
    const before = await lastOutboxId(t.services);
    const res = await importInto("ORD", "sales-1", orders, "text/csv", "&mode=upsert&atomic=true");
    expect(res.status).toBe(200);
    // Every value as stored: nothing written, no event (the system columns said ignored).
    expect(res.body.data).toMatchObject({
      received: rows.length,
      created: 0,
      updated: 0,
      unchanged: rows.length,
      failed: 0,
      errors: [],
      warnings: [{ code: "FIELDS_IGNORED" }],
    });
    expect(await outboxRows(t.services, before)).toEqual([]);
    // NDJSON: the values as JSON (numbers, not text).
    const nd = await exportOf("ORD", "sales-1", "&format=ndjson");
    const back = await importInto("ORD", "sales-1", nd, "application/x-ndjson", "&mode=upsert");
    expect(back.body.data).toMatchObject({ received: rows.length, unchanged: rows.length, failed: 0 });
    // A row that changes a field with M is updated, its equal fields without M (CODE) left alone.
    const customers = await exportOf("CUST", "anag-1", "&$filter=CUST_ID le 5");
    const records = parseCsv(customers, { columns: true }) as Array<Record<string, string>>;
    const n = records.length;
    expect(customers.split("\r\n")[0]).toMatch(/^CUST_ID,CODE,NAME,/);
    const renamed = stringifyCsv(
      records.map((r) => ({ CUST_ID: r.CUST_ID, CODE: r.CODE, NAME: `${r.NAME} (renamed)` })),
      { header: true },
    );
    expect((await importInto("CUST", "anag-1", renamed, "text/csv", "&mode=upsert")).body.data).toEqual({
      received: n,
      created: 0,
      updated: n,
      unchanged: 0,
      failed: 0,
      errors: [],
    });
    // A different value of a field without M is still refused, and changes nothing.
    const first = rows[0]!;
    const changed = `ORD_ID,ORD_NO,STATUS\n${first.ORD_ID},CHANGED-1,${first.STATUS}\n`;
    const refused = await importInto("ORD", "sales-1", changed, "text/csv", "&mode=upsert");
    expect(refused.body.data).toMatchObject({
      updated: 0,
      failed: 1,
      errors: [{ row: 2, field: "ORD_NO", code: "FIELD_NOT_MODIFIABLE" }],
    });
    const stored = await t.services.db.query<{ ORD_NO: string }>(
      `SELECT "ORD_NO" FROM "TB_DOC_ORD00" WHERE "ORD_ID" = $1`,
      [Number(first.ORD_ID)],
    );
    expect(stored.rows[0]!.ORD_NO).toBe(first.ORD_NO);
  });

  it("mode=upsert with an id twice: the first row creates, the next ones update it (in a batch, across batches, atomic)", async () => {
    const last = await lastOutboxId(t.services);
    // Z1 twice in the first batch; Z2 in the first batch and again in the second (MAX_BATCH rows each).
    const lines = ["CITY_ID,NAME,COUNTRY", "Z1,Zeta,IT", "Z1,Zeta renamed,IT", "Z2,Zeta due,IT"];
    for (let i = 0; i < MAX_BATCH; i++) lines.push(`ZF${i},Filler ${i},IT`);
    lines.push("Z2,Zeta due renamed,FR");
    const res = await importInto("CITY", "anag-3", lines.join("\n"), "text/csv", "&mode=upsert");
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual({
      received: MAX_BATCH + 4,
      created: MAX_BATCH + 2,
      updated: 2,
      unchanged: 0,
      failed: 0,
      errors: [],
    });
    const cities = async (ids: string[]) =>
      (
        await t.services.db.query<Record<string, unknown>>(
          `SELECT "CITY_ID", "NAME", "COUNTRY", "TREC" FROM "TB_ANAG_CITY00" WHERE "TENANT_ID" = 'acme' AND "CITY_ID" = ANY($1) ORDER BY "CITY_ID"`,
          [ids],
        )
      ).rows;
    expect(await cities(["Z1", "Z2"])).toEqual([
      { CITY_ID: "Z1", NAME: "Zeta renamed", COUNTRY: "IT", TREC: "M" },
      { CITY_ID: "Z2", NAME: "Zeta due renamed", COUNTRY: "FR", TREC: "M" },
    ]);
    const events = (await outboxRows(t.services, last)).filter((e) => ["Z1", "Z2"].includes(e.AGGREGATE_ID));
    expect(events.map((e) => [e.EVENT_TYPE, e.AGGREGATE_ID])).toEqual([
      ["CITYCreated", "Z1"],
      ["CITYUpdated", "Z1"],
      ["CITYCreated", "Z2"],
      ["CITYUpdated", "Z2"],
    ]);
    // atomic=true: one transaction, the same answer.
    const atomic = await importInto(
      "CITY",
      "anag-3",
      "CITY_ID,NAME,COUNTRY\nZ3,Zeta tre,IT\nZ3,Zeta tre renamed,IT\n",
      "text/csv",
      "&mode=upsert&atomic=true",
    );
    expect(atomic.status).toBe(200);
    expect(atomic.body.data).toMatchObject({ received: 2, created: 1, updated: 1, failed: 0 });
    expect(await cities(["Z3"])).toEqual([
      { CITY_ID: "Z3", NAME: "Zeta tre renamed", COUNTRY: "IT", TREC: "M" },
    ]);
    // mode=create: the second row of an id is its duplicate, the first row written.
    const create = await importInto(
      "CITY",
      "anag-3",
      "CITY_ID,NAME,COUNTRY\nZ4,Zeta 4,IT\nZ4,Zeta 4 bis,IT\n",
      "text/csv",
    );
    expect(create.body.data).toMatchObject({
      created: 1,
      failed: 1,
      errors: [{ row: 3, field: "CITY_ID", code: "DUPLICATE_KEY" }],
    });
    expect(await cities(["Z4"])).toEqual([{ CITY_ID: "Z4", NAME: "Zeta 4", COUNTRY: "IT", TREC: "N" }]);
  });

  it("mode=create of an exported row whose id exists is its DUPLICATE_KEY, not its MEDIA value", async () => {
    const image = {
      file_id: "f-1",
      url: "/api/v4/media/f-1",
      size: 10,
      mime_type: "image/png",
      uploaded_at: "20261101100000",
      public: true,
    };
    await t.services.db.query(
      `UPDATE "TB_ANAG_PROD00" SET "IMAGE" = $1::jsonb WHERE "TENANT_ID" = 'acme' AND "PROD_ID" = 'P0001'`,
      [JSON.stringify(image)],
    );
    const exported = await exportOf("PROD", "catalog-1", "&filter[PROD_ID]=P0001");
    expect(exported).toContain("IMAGE");
    const before = await snapshot(t.services);
    const res = await importInto("PROD", "catalog-1", exported, "text/csv");
    expect(res.body.data).toMatchObject({
      created: 0,
      failed: 1,
      errors: [{ row: 2, field: "PROD_ID", code: "DUPLICATE_KEY" }],
    });
    // Under another id, the image is what a create refuses: it describes a file not uploaded for it.
    const renamed = await importInto("PROD", "catalog-1", exported.replace("P0001,", "PNEW1,"), "text/csv");
    expect(renamed.body.data).toMatchObject({
      failed: 1,
      errors: [{ row: 2, field: "IMAGE", code: "MEDIA_VALUE_NOT_ALLOWED" }],
    });
    expect(await snapshot(t.services)).toEqual(before);
    // mode=upsert takes the record's own image back (every value as stored: unchanged).
    const upsert = await importInto("PROD", "catalog-1", exported, "text/csv", "&mode=upsert");
    expect(upsert.body.data).toMatchObject({ updated: 0, unchanged: 1, failed: 0 });
  });
});
