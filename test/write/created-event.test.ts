// A create that is its transaction's only change writes its row and its Created event in one
// statement outside BEGIN and COMMIT (issue 19), the payload built in SQL by each field's codec
// (eventJson). Its outbox row must be the one the general path writes, byte for byte: each case is
// created both ways with the same clock, and each event's PAYLOAD is compared with the other's and
// with JSON.stringify of the stored row (what the general path makes of the row it inserted).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openPostgres } from "../../src/db/database.ts";
import { OUTBOX_CHANNEL } from "../../src/events/outbox.ts";
import { createRecord } from "../../src/resolvers/write/create.ts";
import { UploadedMedia } from "../../src/resolvers/write/media-values.ts";
import { createOne } from "../../src/resolvers/write/operations.ts";
import { requestBudget } from "../../src/resolvers/write/context.ts";
import { runWrite } from "../../src/resolvers/write/pipeline.ts";
import { rowToRecord } from "../../src/resolvers/write/values.ts";
import type { Services } from "../../src/services.ts";
import { createTestServices, TEST_DATABASE_URL } from "../helpers/env.ts";
import { addField, contextFor, lastOutboxId, sampleFixtureWith, setRow, snapshot } from "./helpers.ts";

if (TEST_DATABASE_URL) {
  describe("the Created event of a one-statement create (postgres)", () => {
    let services: Services;
    const sent: string[] = [];
    const now = new Date("2026-03-04T05:06:07.890Z");
    const anna = contextFor("anna", "erp", { now: () => now });
    /** PRICE is served by its own menu entry, outside erp. */
    const annaOn = (dimCode: string) =>
      dimCode === "PRICE" ? contextFor("anna", "price-1", { now: () => now }) : anna;

    beforeAll(async () => {
      // A TIMESTAMP field besides the sample's STRING, TEXT, INTEGER, DECIMAL, BOOLEAN, DATE, JSON
      // and MEDIA ones.
      const fixture = await sampleFixtureWith((f) => {
        // Given on create: the product's image (as the upload path makes it), the order's total,
        // the customer's risk score.
        setRow(f.TB_COST, { COD_DIM: "CUST", COD_VAR: "RISK_SCORE" }, { COD_ON_OFF: "LDRNM" });
        setRow(f.TB_COST, { COD_DIM: "PROD", COD_VAR: "IMAGE" }, { COD_ON_OFF: "LDNM" });
        setRow(f.TB_COST, { COD_DIM: "ORD", COD_VAR: "TOTAL" }, { COD_ON_OFF: "LDRNM" });
        addField(f, "PROD", 8, {
          COD_VAR: "CHECKED_AT",
          DESC_VAR: "Checked at",
          DATA_TYPE: "TIMESTAMP",
          LENGTH: 14,
        });
        // A second nullable key of CUST (its billing city): a create looks up two nullable keys.
        addField(f, "CUST", 12, {
          COD_VAR: "BILL_CITY_ID",
          DESC_VAR: "Billing city",
          DATA_TYPE: "STRING",
          LENGTH: 10,
          TIPO_CAMPO: "VARS",
          TIPO_VAR: "CITY",
        });
        // Two relations to CITY: each named.
        setRow(f.TB_OBJECT, { COD_DIM: "CUST", COD_VAR: "CITY_ID" }, { REL_NAME: "CITY" });
        f.TB_OBJECT!.push({
          COD_DIM: "CUST",
          COD_VAR: "BILL_CITY_ID",
          COD_DIM_OBJ: "CITY",
          COD_VAR_OBJ: "CITY_ID",
          COD_VAR_DESC: "NAME",
          REL_NAME: "BILL_CITY",
        });
      });
      services = await createTestServices("postgres", {
        fixture,
        // The dependency probe's SELECT 1 may come at any time, and so may the listening
        // connection's LISTENs when it is re-established (a loaded host's watchdog verdict):
        // not the create's.
        onStatement: (text) => {
          if (text !== "SELECT 1" && !/^\s*((UN)?LISTEN\b|SET application_name)/.test(text))
            sent.push(text.replace(/\s+/g, " "));
        },
      });
    });
    afterAll(async () => {
      await services?.close();
    });

    interface OutboxRow {
      OUTBOX_ID: number;
      EVENT_TYPE: string;
      AGGREGATE_TYPE: string;
      AGGREGATE_ID: string;
      payload: string;
      TENANT_ID: string;
      CREATED_AT: Date;
    }
    async function event(eventId: string): Promise<OutboxRow> {
      const { rows } = await services.db.query<OutboxRow>(
        `SELECT "OUTBOX_ID", "EVENT_TYPE", "AGGREGATE_TYPE", "AGGREGATE_ID", "PAYLOAD"::text AS payload,
                "TENANT_ID", "CREATED_AT" FROM "TB_ANAG_OUTBOX00" WHERE "OUTBOX_ID" = $1`,
        [eventId],
      );
      return rows[0]!;
    }
    /** The payload the general path writes for the stored record: JSON.stringify of its row. */
    async function payloadOfRow(dimCode: string, id: unknown): Promise<string> {
      const dim = services.metadata.current().dimensions.get(dimCode)!;
      const { rows } = await services.db.query(
        `SELECT * FROM "${dim.tableName}" WHERE "TENANT_ID" = 'acme' AND "${dim.idField}" = $1`,
        [id],
      );
      const text = JSON.stringify(rowToRecord(dim, rows[0]!));
      return (await services.db.query<{ t: string }>(`SELECT $1::jsonb::text AS t`, [text])).rows[0]!.t;
    }
    /** The payload without the values the database makes anew for each record (id, counters). */
    async function withoutMade(payload: string, keys: string[]): Promise<string> {
      const { rows } = await services.db.query<{ t: string }>(`SELECT ($1::jsonb - $2::text[])::text AS t`, [
        payload,
        keys,
      ]);
      return rows[0]!.t;
    }

    const oneStatement = /^WITH .*ins AS \(INSERT INTO .*ev AS \(INSERT INTO "TB_ANAG_OUTBOX00"/;
    /**
     * Creates `body` in `dim` through createOne (one statement) and through the general path; the
     * events must be equal but for the values made per record (`made`). A create whose templates
     * query first (a templated id) sends its row and event as the last statement of a transaction.
     */
    async function expectSameEvent(
      dimCode: string,
      body: () => Record<string, unknown>,
      made: string[],
      after: "nothing" | "queries" = "nothing",
    ) {
      sent.length = 0;
      const alone = await createOne(services, annaOn(dimCode), dimCode, body());
      if (after === "nothing") {
        // One statement: no BEGIN, no COMMIT, the outbox row written by it.
        expect(sent).toHaveLength(1);
        expect(sent[0]).toMatch(oneStatement);
      } else {
        expect(sent[0]).toBe("BEGIN");
        expect(sent.at(-1)).toBe("COMMIT");
        expect(sent.filter((s) => oneStatement.test(s))).toHaveLength(1);
        expect(sent.filter((s) => s.includes('"TB_ANAG_OUTBOX00"'))).toHaveLength(1);
      }
      sent.length = 0;
      const general = await runWrite(services, annaOn(dimCode), dimCode, "create", {}, (w, dim) =>
        createRecord(w, dim, body()),
      );
      expect(sent[0]).toBe("BEGIN");
      expect(sent.at(-1)).toBe("COMMIT");

      const a = await event(alone.eventId);
      const g = await event(general.eventId);
      expect(a.payload).toBe(await payloadOfRow(dimCode, alone.recordId));
      expect(g.payload).toBe(await payloadOfRow(dimCode, general.recordId));
      expect(await withoutMade(a.payload, made)).toBe(await withoutMade(g.payload, made));
      const { OUTBOX_ID: _a, payload: _pa, AGGREGATE_ID: idA, ...restA } = a;
      const { OUTBOX_ID: _g, payload: _pg, AGGREGATE_ID: idG, ...restG } = g;
      expect(restA).toEqual(restG);
      expect(restA.CREATED_AT.toISOString()).toBe(now.toISOString());
      expect([idA, idG]).toEqual([String(alone.recordId), String(general.recordId)]);
      // The record answered is the one stored, as the general path answers it.
      expect(JSON.stringify(alone.record)).toBe(JSON.stringify(await storedRecord(dimCode, alone.recordId)));
      return { alone, general, payload: JSON.parse(a.payload) as Record<string, unknown> };
    }
    async function storedRecord(dimCode: string, id: unknown) {
      const dim = services.metadata.current().dimensions.get(dimCode)!;
      const { rows } = await services.db.query(
        `SELECT * FROM "${dim.tableName}" WHERE "TENANT_ID" = 'acme' AND "${dim.idField}" = $1`,
        [id],
      );
      return rowToRecord(dim, rows[0]!);
    }

    it("a customer: text, whole numbers, DECIMAL scaled, a boolean, a key looked up, a counter", async () => {
      for (const credit of [12345.5, 0.05, 1000, -7.25, 9999999999.99, 0]) {
        const { payload } = await expectSameEvent(
          "CUST",
          () => ({
            NAME: 'Événement «Ünïcode» "quoted" \\ 🚀',
            CITY_ID: "MI",
            EMAIL: "a@b.example",
            CREDIT_LIMIT: credit,
            VIP: credit > 0,
            NOTES: "line 1\nline 2\ttab \u0001",
            RISK_SCORE: -42,
          }),
          ["CUST_ID", "CODE"],
        );
        expect(payload.CREDIT_LIMIT).toBe(credit);
        expect(payload.CODE).toMatch(/^C-\d{5}$/);
      }
      // Nothing but the required name: the other fields null.
      await expectSameEvent("CUST", () => ({ NAME: "Bare" }), ["CUST_ID", "CODE"]);
    });

    it("a customer with two nullable keys looked up: still one statement", async () => {
      const { payload } = await expectSameEvent(
        "CUST",
        () => ({ NAME: "Two cities", CITY_ID: "MI", BILL_CITY_ID: "RM" }),
        ["CUST_ID", "CODE"],
      );
      expect(payload).toMatchObject({ CITY_ID: "MI", BILL_CITY_ID: "RM" });
    });

    it("two nullable keys: the one naming no record is refused by name (the first when both), nothing stays", async () => {
      const before = await snapshot(services);
      const last = await lastOutboxId(services);
      for (const [body, field] of [
        [{ CITY_ID: "MI", BILL_CITY_ID: "XX" }, "BILL_CITY_ID"],
        [{ CITY_ID: "XX", BILL_CITY_ID: "RM" }, "CITY_ID"],
        [{ CITY_ID: "XX", BILL_CITY_ID: "YY" }, "CITY_ID"],
        [{ BILL_CITY_ID: "YY" }, "BILL_CITY_ID"],
      ] as const) {
        sent.length = 0;
        await expect(createOne(services, anna, "CUST", { NAME: "Nowhere", ...body })).rejects.toMatchObject({
          status: 400,
          code: "INVALID_FOREIGN_KEY",
          field,
        });
        // Refused by the one statement itself, not by the general path.
        expect(sent).toHaveLength(1);
        expect(sent[0]).toMatch(oneStatement);
      }
      expect(await snapshot(services)).toEqual(before);
      expect(await lastOutboxId(services)).toBe(last);
    });

    it("the request's event budget: the event's exact bytes once written; nothing when the statement fails", async () => {
      const budget = requestBudget(services.config);
      const deps = { ...services, budget };
      sent.length = 0;
      const created = await createOne(deps, anna, "CUST", { NAME: "Budgeted", CITY_ID: "MI" });
      expect(sent.filter((s) => oneStatement.test(s))).toHaveLength(1);
      const exact = Buffer.byteLength(JSON.stringify(await storedRecord("CUST", created.recordId)));
      expect(budget.events.usedBytes).toBe(exact);
      // A city that names none: refused by the statement itself; what was held goes back.
      sent.length = 0;
      await expect(createOne(deps, anna, "CUST", { NAME: "Nowhere", CITY_ID: "XX" })).rejects.toMatchObject({
        code: "INVALID_FOREIGN_KEY",
      });
      expect(sent.filter((s) => oneStatement.test(s))).toHaveLength(1);
      expect(budget.events.usedBytes).toBe(exact);
    });

    it("a product: DATE from a template, DECIMAL, JSON, MEDIA and TIMESTAMP, a templated id", async () => {
      const image = {
        file_id: "f-1",
        url: "/api/v4/media/f-1",
        size: 1234,
        mime_type: "image/png",
        uploaded_at: "20260304050607",
        public: true,
      };
      const { payload } = await expectSameEvent(
        "PROD",
        () => ({
          NAME: "Widget",
          UNIT_PRICE: 19.9,
          WEIGHT: 0.1,
          SPECS: { b: [1, 2.5, 1e21, 1e-7, "x", null, true], a: { nested: "ü" }, "": 0 },
          IMAGE: new UploadedMedia(image),
          CHECKED_AT: "20260304050607",
        }),
        ["PROD_ID"],
        "queries",
      );
      expect(payload).toMatchObject({ UNIT_PRICE: 19.9, WEIGHT: 0.1, LAUNCHED: "20260304", IMAGE: image });
      // A JSON string, a JSON number, JSON null.
      for (const specs of ["text", 3.25, null]) {
        await expectSameEvent(
          "PROD",
          () => ({ NAME: "Specs", UNIT_PRICE: 1, SPECS: specs }),
          ["PROD_ID"],
          "queries",
        );
      }
    });

    it("an order: a counter with text around it, a date template, keys on NOT NULL columns", async () => {
      const { rows } = await services.db.query<{ id: number }>(
        `SELECT "CUST_ID" AS id FROM "TB_ANAG_CUST00" WHERE "TENANT_ID" = 'acme' AND "TREC" <> 'C' LIMIT 1`,
      );
      await expectSameEvent("ORD", () => ({ CUST_ID: rows[0]!.id, TOTAL: 250.75 }), ["ORD_ID", "ORD_NO"]);
    });

    it("an id beyond JavaScript's safe integers: its digits as text, as the row parsed gives them", async () => {
      await services.db.exec(
        `ALTER TABLE "TB_ANAG_PRICE00" ALTER COLUMN "PRICE_ID" RESTART WITH 9007199254740993`,
      );
      const { alone, payload } = await expectSameEvent(
        "PRICE",
        () => ({ PROD_ID: "P0001", COD_LST: "STD", AREA: "EU", PRICE: 10.5 }),
        ["PRICE_ID"],
      );
      expect(typeof alone.recordId).toBe("string");
      expect(payload.PRICE_ID).toBe(alone.recordId);
    });

    it("wakes the relays of other processes: the NOTIFY goes with the statement or, folded, after it", async () => {
      if (services.db.kind !== "postgres") throw new Error("PostgreSQL expected");
      const other = openPostgres(services.db.connectionString);
      try {
        let woken!: () => void;
        const wake = new Promise<void>((resolve) => {
          woken = resolve;
        });
        const unlisten = await other.listen(OUTBOX_CHANNEL, () => woken());
        sent.length = 0;
        await createOne(services, anna, "CITY", { CITY_ID: "WK1", NAME: "Woken", COUNTRY: "IT" });
        expect(sent).toHaveLength(1);
        await wake;
        await unlisten();
      } finally {
        await other.close();
      }
    });

    it("refusals leave nothing behind: a duplicate key 409, a key naming no record 400 (nullable or NOT NULL)", async () => {
      const before = await snapshot(services);
      const last = await lastOutboxId(services);
      await expect(
        createOne(services, anna, "CITY", { CITY_ID: "MI", NAME: "Again", COUNTRY: "IT" }),
      ).rejects.toMatchObject({
        status: 409,
        code: "DUPLICATE_KEY",
      });
      await expect(
        createOne(services, anna, "CUST", { NAME: "Nowhere", CITY_ID: "XX" }),
      ).rejects.toMatchObject({
        status: 400,
        code: "INVALID_FOREIGN_KEY",
        field: "CITY_ID",
      });
      await expect(
        createOne(services, annaOn("PRICE"), "PRICE", {
          PROD_ID: "NOPE",
          COD_LST: "STD",
          AREA: "EU",
          PRICE: 1,
        }),
      ).rejects.toMatchObject({ status: 400, code: "INVALID_FOREIGN_KEY", field: "PROD_ID" });
      expect(await snapshot(services)).toEqual(before);
      expect(await lastOutboxId(services)).toBe(last);
    });
  });
}
