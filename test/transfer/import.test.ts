// POST /api/v4/core/{dim}/import (decisions §20): CSV and NDJSON bodies through the write pipeline,
// create and upsert, atomic imports, the answer's counts and errors, and the body's refusals.
import { Readable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, loginAs } from "../helpers/auth.ts";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";
import { lastOutboxId, outboxRows, snapshot } from "../write/helpers.ts";
import { NO_RATE_LIMITS } from "../write/http.ts";

const MAX_BATCH = 20;
const ATOMIC_MAX = 50;
const MAX_BYTES = 4096;

describe.each(BACKENDS)("import (%s)", (backend) => {
  let t: TestApp;
  let anna: string;
  let lucia: string;

  beforeAll(async () => {
    t = await createTestApp(backend, {
      fixture: "sample",
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
    expect(res.body).toEqual({ data: { received: 2, created: 2, updated: 0, failed: 0, errors: [] } });
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
    expect(res.body.data).toEqual({ received: 2, created: 1, updated: 1, failed: 0, errors: [] });
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
    expect(res.body).toMatchObject({ code: "INVALID_FIELD", field: "NOPE", details: { row: 2, created: 0 } });
    expect(await snapshot(t.services)).toEqual(before);
  });

  it("an NDJSON line that is not JSON is 400 INVALID_JSON naming its row", async () => {
    const res = await ndjson('{"NAME":"Json A"}\n{"NAME":\n', "&atomic=true");
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ code: "INVALID_JSON", details: { row: 2 } });
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

  it("an exported CSV imports back (mode=upsert): the same records, updated", async () => {
    const exported = await t.app.inject({
      method: "GET",
      url: "/api/v4/core/CUST/export?source=anag-1&format=csv&$fields=CUST_ID,NAME,CITY_ID,CREDIT_LIMIT,VIP&filter[NAME][$like]=All%25",
      headers: bearer(anna),
    });
    expect(exported.statusCode).toBe(200);
    const res = await csv(exported.body, "&mode=upsert&atomic=true");
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ received: 2, created: 0, updated: 2, failed: 0 });
  });
});
