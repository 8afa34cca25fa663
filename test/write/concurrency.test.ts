// Concurrent writers: sequences stay gap-free and unique, and concurrent updates of one record
// queue on its row lock (each sees the previous one), with one outbox row each.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createOne, updateOne } from "../../src/resolvers/write/operations.ts";
import type { Services } from "../../src/services.ts";
import { BACKENDS, createTestServices } from "../helpers/env.ts";
import { contextFor, lastOutboxId, outboxRows, row } from "./helpers.ts";

describe.each(BACKENDS)("concurrent writes (%s)", (backend) => {
  let services: Services;

  beforeAll(async () => {
    services = await createTestServices(backend, { fixture: "sample" });
  });
  afterAll(async () => {
    await services?.close();
  });

  it("50 parallel creates on one sequence get 50 distinct, gap-free numbers", async () => {
    const ctx = contextFor("anna", "sales-1");
    const year = String(new Date().getUTCFullYear());
    const before = await services.db.query<{ VALUE: number }>(
      `SELECT "VALUE" FROM "TB_SEQUENCE" WHERE "TENANT_ID" = 'acme' AND "SEQ_NAME" = 'ORD'`,
    );
    const start = Number(before.rows[0]!.VALUE);
    const results = await Promise.all(
      Array.from({ length: 50 }, () => createOne(services, ctx, "ORD", { CUST_ID: 1 })),
    );
    const numbers = results
      .map((r) => {
        const m = /^ORD-(\d{4})-(\d{6})$/.exec(String(r.record.ORD_NO));
        expect(m?.[1]).toBe(year);
        return Number(m?.[2]);
      })
      .sort((a, b) => a - b);
    expect(numbers).toEqual(Array.from({ length: 50 }, (_, i) => start + 1 + i));
    const stored = await services.db.query(
      `SELECT DISTINCT "ORD_NO" FROM "TB_DOC_ORD00" WHERE "ORD_NO" LIKE $1`,
      [`ORD-${year}-%`],
    );
    expect(stored.rows.length).toBeGreaterThanOrEqual(50);
  });

  it("20 parallel PATCHes of one record leave it consistent, with 20 outbox rows", async () => {
    const ctx = contextFor("anna", "anag-1");
    const created = await createOne(services, ctx, "CUST", { NAME: "Busy Srl" });
    const last = await lastOutboxId(services);
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        updateOne(services, ctx, "CUST", String(created.recordId), { NOTES: `edit ${i}` }, "patch"),
      ),
    );
    expect(results.every((r) => r.record.TREC === "M")).toBe(true);
    const events = (await outboxRows(services, last)).filter(
      (e) => e.AGGREGATE_ID === String(created.recordId),
    );
    expect(events).toHaveLength(20);
    expect(events.every((e) => e.EVENT_TYPE === "CUSTUpdated")).toBe(true);
    expect(new Set(events.map((e) => e.PAYLOAD.NOTES)).size).toBe(20);
    // The row lock orders the updates: the stored record is the one the last event describes.
    const stored = await row(services, "TB_ANAG_CUST00", "CUST_ID", created.recordId);
    expect(stored?.NOTES).toBe(events.at(-1)!.PAYLOAD.NOTES);
    expect(stored).toMatchObject({ TREC: "M", LOWNER: "anna", NAME: "Busy Srl" });
  });
});
