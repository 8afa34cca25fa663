// POST /api/v4/core/{dim}/import (decisions §20), what an exploratory test found: batches cut by
// their events' bytes as well as by rows (a file of wide rows far below IMPORT_MAX_BYTES was 413),
// unknown query parameters refused (dry_run=true wrote the rows; a restore's too), upsert rows
// holding their stored values written as nothing (unchanged), the 415 naming the types the import
// takes, and the system columns a row gives (TREC, audit, CENTRO_DETT) said ignored.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, loginAs } from "../helpers/auth.ts";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";
import { lastOutboxId, outboxRows, snapshot } from "../write/helpers.ts";
import { NO_RATE_LIMITS } from "../write/http.ts";

const KB = 1024;
/** The events one transaction may write: small, so that a few wide rows pass it. */
const EVENTS_MAX = 64 * KB;
const MAX_BATCH = 100;

describe.each(BACKENDS)("import fixes (%s)", (backend) => {
  let t: TestApp;
  let anna: string;

  beforeAll(async () => {
    t = await createTestApp(backend, {
      fixture: "sample",
      env: {
        ...NO_RATE_LIMITS,
        MAX_BATCH_SIZE: String(MAX_BATCH),
        REQUEST_EVENTS_MAX_BYTES: String(EVENTS_MAX),
        IMPORT_MAX_BYTES: String(8 * 1024 * KB),
      },
    });
    anna = await loginAs(t.app, "anna", "anna-secret-1");
  });
  afterAll(async () => {
    await t?.close();
  });

  const send = async (body: string, type: string, query = "", url = "/api/v4/core/CUST/import") => {
    const res = await t.app.inject({
      method: "POST",
      url: `${url}?source=anag-1${query}`,
      headers: { ...bearer(anna), ...(type ? { "content-type": type } : {}) },
      payload: body,
    });
    return { status: res.statusCode, body: res.json() };
  };
  const csv = (body: string, query = "") => send(body, "text/csv", query);
  const named = async (prefix: string) =>
    (
      await t.services.db.query<Record<string, unknown>>(
        `SELECT "CUST_ID", "NAME", "NOTES", "TREC", "LOWNER" FROM "TB_ANAG_CUST00" WHERE "NAME" LIKE $1 ORDER BY "CUST_ID"`,
        [`${prefix}%`],
      )
    ).rows;
  const revisions = async (ids: unknown[]) =>
    Number(
      (
        await t.services.db.query<{ n: string }>(
          `SELECT count(*) AS n FROM "TB_HISTORY" WHERE "DIMENSION" = 'CUST' AND "RECORD_ID" = ANY($1)`,
          [ids.map(String)],
        )
      ).rows[0]!.n,
    );
  /** `n` CSV rows named `${prefix} i` whose NOTES hold `width` characters. */
  const wideRows = (prefix: string, n: number, width: number, letter = "x") =>
    `NAME,NOTES\n${Array.from({ length: n }, (_, i) => `${prefix} ${i},${letter.repeat(width)}`).join("\n")}\n`;

  describe("batches cut by their events' bytes (REQUEST_EVENTS_MAX_BYTES)", () => {
    it("a file of wide rows whose events pass the bound together imports whole, in several batches", async () => {
      // 40 rows of 6 KB: 240 KB of events, nearly four times what one transaction may write, and
      // far fewer rows than MAX_BATCH_SIZE. Before, batches were cut by rows only: 413, nothing written.
      const last = await lastOutboxId(t.services);
      const res = await csv(wideRows("Wide", 40, 6 * KB));
      expect(res.body).toEqual({
        data: { received: 40, created: 40, updated: 0, unchanged: 0, failed: 0, errors: [] },
      });
      expect(res.status).toBe(200);
      const rows = await named("Wide ");
      expect(rows).toHaveLength(40);
      expect(rows.every((r) => (r.NOTES as string).length === 6 * KB)).toBe(true);
      expect(await outboxRows(t.services, last)).toHaveLength(40);
    });

    it("updates whose events outgrow the estimate (the record before and after) are cut where the bound is reached", async () => {
      // An update's event holds the whole record and the values it changes before: twice what the
      // row holds. The batch cut by the row's bytes passes the bound; it is written again in two.
      await csv(wideRows("Regrown", 20, 6 * KB));
      const ids = (await named("Regrown ")).map((r) => r.CUST_ID);
      const body = `CUST_ID,NOTES\n${ids.map((id) => `${id},${"y".repeat(6 * KB)}`).join("\n")}\n`;
      const last = await lastOutboxId(t.services);
      const res = await csv(body, "&mode=upsert");
      expect(res.body).toEqual({
        data: { received: 20, created: 0, updated: 20, unchanged: 0, failed: 0, errors: [] },
      });
      const rows = await named("Regrown ");
      expect(rows.every((r) => r.NOTES === "y".repeat(6 * KB) && r.TREC === "M")).toBe(true);
      // Each record once: the batch rolled back was not counted, nor its events kept.
      const events = await outboxRows(t.services, last);
      expect(events.map((e) => e.AGGREGATE_ID).sort()).toEqual(ids.map(String).sort());
    });

    it("a row whose events alone pass the bound is refused on its own, listed; the others are written", async () => {
      const body = `NAME,NOTES\nAlone 0,small\nAlone 1,${"z".repeat(EVENTS_MAX + KB)}\nAlone 2,small\n`;
      const res = await csv(body);
      expect(res.status).toBe(200);
      expect(res.body.data).toMatchObject({ received: 3, created: 2, failed: 1 });
      expect(res.body.data.errors).toEqual([
        {
          row: 3,
          field: null,
          code: "PAYLOAD_TOO_LARGE",
          message: expect.stringContaining(`exceed ${EVENTS_MAX} bytes (REQUEST_EVENTS_MAX_BYTES)`),
        },
      ]);
      expect((await named("Alone ")).map((r) => r.NAME)).toEqual(["Alone 0", "Alone 2"]);
    });

    it("atomic=true is one transaction: events past the bound are 413 naming it, with the counts, nothing written", async () => {
      const before = await snapshot(t.services);
      const res = await csv(wideRows("Atomwide", 20, 6 * KB), "&atomic=true");
      expect(res.status).toBe(413);
      expect(res.body).toMatchObject({
        code: "PAYLOAD_TOO_LARGE",
        status: 413,
        details: {
          max_event_bytes: EVENTS_MAX,
          received: 20,
          created: 0,
          updated: 0,
          unchanged: 0,
          failed: 0,
        },
      });
      expect(res.body.message).toMatch(
        /REQUEST_EVENTS_MAX_BYTES.*import without atomic=true.*Nothing was written\.$/,
      );
      expect(await snapshot(t.services)).toEqual(before);
    });
  });

  describe("unknown query parameters are refused", () => {
    it.each([
      ["dry_run=true", "dry_run"],
      ["$num_rows=1", "$num_rows"],
      ["filter[NAME]=x", "filter[NAME]"],
      ["fields=NAME", "fields"],
      ["format=ndjson", "format"],
    ])("import ?%s: 400 INVALID_PARAMETER naming it, nothing written", async (param, name) => {
      const res = await csv("NAME\nDry Run Co\n", `&${param}`);
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ code: "INVALID_PARAMETER", field: name });
      expect(await named("Dry Run Co")).toEqual([]);
    });

    it("mode, atomic, source and the context parameters are still taken", async () => {
      const res = await csv("NAME\nParams Co\n", "&mode=create&atomic=false&center_dett=&_=1");
      expect([res.status, res.body.data.created]).toEqual([200, 1]);
    });

    it("a restore with dry_run=true (or a filter) is 400 and restores nothing", async () => {
      await csv("NAME\nRestore Me\n");
      const [record] = await named("Restore Me");
      const id = record!.CUST_ID;
      await csv(`CUST_ID,NAME\n${id},Restore Me renamed\n`, "&mode=upsert");
      for (const param of ["dry_run=true", "filter[NAME]=x", "$fields=NAME"]) {
        const res = await t.app.inject({
          method: "POST",
          url: `/api/v4/core/CUST/${id}/history/1/restore?source=anag-1&${param}`,
          headers: bearer(anna),
        });
        expect(res.statusCode).toBe(400);
        expect(res.json()).toMatchObject({ code: "INVALID_PARAMETER" });
      }
      expect((await named("Restore Me")).map((r) => r.NAME)).toEqual(["Restore Me renamed"]);
      const restored = await t.app.inject({
        method: "POST",
        url: `/api/v4/core/CUST/${id}/history/1/restore?source=anag-1`,
        headers: bearer(anna),
      });
      expect(restored.statusCode).toBe(200);
      expect((await named("Restore Me")).map((r) => r.NAME)).toEqual(["Restore Me"]);
    });
  });

  describe("upsert rows holding their stored values change nothing", () => {
    it("no write, no revision, no event: counted as unchanged; a changed row beside them is updated", async () => {
      await csv('NAME,CREDIT_LIMIT,VIP,NOTES\nSame 1,10.5,true,note\nSame 2,,false,""\n');
      const [one, two] = await named("Same ");
      const before = await named("Same ");
      const history = await revisions([one!.CUST_ID, two!.CUST_ID]);
      const last = await lastOutboxId(t.services);
      const res = await csv(
        `CUST_ID,NAME,CREDIT_LIMIT,VIP,NOTES\n${one!.CUST_ID},Same 1,10.5,true,note\n${two!.CUST_ID},Same 2 changed,,false,""\n`,
        "&mode=upsert",
      );
      expect(res.body).toEqual({
        data: { received: 2, created: 0, updated: 1, unchanged: 1, failed: 0, errors: [] },
      });
      const after = await named("Same ");
      // The unchanged record as it was: TREC N, its audit fields not stamped again.
      expect(after[0]).toEqual(before[0]);
      expect(after[0]!.TREC).toBe("N");
      expect(after[1]).toMatchObject({ NAME: "Same 2 changed", TREC: "M" });
      expect((await outboxRows(t.services, last)).map((e) => e.AGGREGATE_ID)).toEqual([String(two!.CUST_ID)]);
      expect(await revisions([one!.CUST_ID, two!.CUST_ID])).toBe(history + 1);
      // NDJSON too, and with atomic=true.
      const nd = await send(
        `${JSON.stringify({ CUST_ID: one!.CUST_ID, NAME: "Same 1", CREDIT_LIMIT: 10.5, VIP: true })}\n`,
        "application/x-ndjson",
        "&mode=upsert&atomic=true",
      );
      expect(nd.body.data).toMatchObject({ updated: 0, unchanged: 1, failed: 0 });
      expect(await outboxRows(t.services, last)).toHaveLength(1);
    });

    it("a field the caller may not read is not compared: the row goes to the pipeline, which refuses it", async () => {
      // RISK_SCORE: R only (no L, no D) for anna.
      await csv("NAME\nHidden 1\n");
      const [record] = await named("Hidden 1");
      const res = await csv(`CUST_ID,NAME,RISK_SCORE\n${record!.CUST_ID},Hidden 1,\n`, "&mode=upsert");
      expect(res.body.data).toMatchObject({ unchanged: 0, failed: 1, errors: [{ field: "RISK_SCORE" }] });
    });
  });

  describe("the 415 of an import names the types it takes", () => {
    it.each([["application/vnd.ms-excel"], ["application/json"], ["text/plain"], ["application/csv"]])(
      "Content-Type %s",
      async (type) => {
        const res = await send(type === "application/json" ? "{}" : "NAME\nTyped\n", type);
        expect(res.status).toBe(415);
        expect(res.body).toMatchObject({
          code: "UNSUPPORTED_MEDIA_TYPE",
          details: { accepted: ["text/csv", "application/x-ndjson"] },
        });
        expect(res.body.message).toBe(
          `An import body is text/csv (a header row of field codes) or application/x-ndjson, in UTF-8; got Content-Type ${type}.`,
        );
        expect(await named("Typed")).toEqual([]);
      },
    );

    it("no Content-Type at all", async () => {
      const res = await send("NAME\nTyped\n", "");
      expect(res.status).toBe(415);
      expect(res.body.message).toMatch(/^An import body is text\/csv .*; got no Content-Type\.$/);
    });
  });

  describe("system columns are said ignored", () => {
    it("TREC and audit columns of a row: written as a create sets them, and the answer warns naming them", async () => {
      const res = await csv("NAME,TREC,OWNER,CREDIT_LIMIT\nSystem Co,C,mallory,5\n");
      expect(res.status).toBe(200);
      expect(res.body.data).toMatchObject({ received: 1, created: 1, failed: 0 });
      expect(res.body.data.warnings).toEqual([
        {
          code: "FIELDS_IGNORED",
          message: expect.stringMatching(/^TREC, OWNER are system fields .* left them as stored/),
          details: { fields: ["TREC", "OWNER"] },
        },
      ]);
      const stored = await t.services.db.query(
        `SELECT "TREC", "OWNER", "CREDIT_LIMIT" FROM "TB_ANAG_CUST00" WHERE "NAME" = 'System Co'`,
      );
      expect(stored.rows).toMatchObject([{ TREC: "N", OWNER: "anna" }]);
    });

    it("an import without them has no warnings", async () => {
      const res = await csv("NAME\nPlain Co\n");
      expect(res.body.data).not.toHaveProperty("warnings");
    });
  });
});
