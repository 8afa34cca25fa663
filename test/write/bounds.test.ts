// One request must not hold the service, and values must be what they claim (issue 8): cascaded
// children count toward the batch limit, TEXT values and a request's events are bounded, lone
// surrogates and unsafe ids are refused, INTEGER ids in paths are canonical, dates in filters real.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loginAs } from "../helpers/auth.ts";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";
import { lastOutboxId, outboxRows } from "./helpers.ts";
import { type Client, client, NO_RATE_LIMITS } from "./http.ts";

describe.each(BACKENDS)("bounded work and checked values (%s)", (backend) => {
  let t: TestApp;
  let olga: Client;

  beforeAll(async () => {
    t = await createTestApp(backend, { fixture: "demo", env: NO_RATE_LIMITS });
    olga = client(t.app, await loginAs(t.app, "olga", "olga-demo-1"));
  });
  afterAll(async () => {
    await t?.close();
  });

  it("a PO with 10,000 lines is refused with 413 before any write; a concurrent read is answered", async () => {
    const before = await lastOutboxId(t.services);
    const lines = Array.from({ length: 10_000 }, (_, i) => ({
      ITEM_ID: "GC-0001",
      QTY_KG: i + 1,
      PRICE: 7.8,
    }));
    const started = Date.now();
    const [create, read] = await Promise.all([
      olga.post("/api/v4/core/PO?source=purchasing-1", { data: { SUPP_ID: 1, POL: lines } }),
      olga.get("/api/v4/core/ITEM?source=master-2"),
    ]);
    const elapsed = Date.now() - started;
    expect(create.status).toBe(413);
    expect(create.body).toMatchObject({
      code: "PAYLOAD_TOO_LARGE",
      status: 413,
      details: { max_batch_size: 500, count: 10_001 },
    });
    expect(read.status).toBe(200);
    expect(read.body.data.length).toBeGreaterThan(0);
    expect(await lastOutboxId(t.services)).toBe(before);
    // Refused by counting, not by trying: far from the 35 s the cascade used to take.
    expect(elapsed).toBeLessThan(10_000);
  });

  it("children count in batches too: two POs of 300 lines each are 413", async () => {
    const po = {
      SUPP_ID: 1,
      POL: Array.from({ length: 300 }, () => ({ ITEM_ID: "GC-0001", QTY_KG: 1, PRICE: 1 })),
    };
    const res = await olga.post("/api/v4/core/PO/batch?source=purchasing-1", { data: [po, po] });
    expect(res.status).toBe(413);
    expect(res.body.details).toEqual({ max_batch_size: 500, count: 602 });
  });

  it("a TEXT value over FIELD_MAX_BYTES (1 MiB by default) is 400 naming the field", async () => {
    const res = await olga.post("/api/v4/core/ITEM?source=master-2", {
      data: { ITEM_ID: "BIG-1", NAME: "Big", TASTING_NOTES: "x".repeat(5 * 1024 * 1024) },
    });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ code: "INVALID_FIELD_VALUE", field: "TASTING_NOTES" });
    expect(res.body.message).toContain("longer than 1048576 bytes");
  });

  it("500 one-field changes to a record with a large TEXT are refused whole once the events pass their bound", async () => {
    const notes = "n".repeat(900 * 1024);
    const created = await olga.post("/api/v4/core/ITEM?source=master-2", {
      data: { ITEM_ID: "NOTES-1", NAME: "Notes", UNIT_COST: 5, TASTING_NOTES: notes },
    });
    expect(created.status).toBe(201);
    const before = await lastOutboxId(t.services);
    const changes = Array.from({ length: 500 }, (_, i) => ({ id: "NOTES-1", NAME: `Notes ${i}` }));
    const started = Date.now();
    const res = await olga.patch("/api/v4/core/ITEM/batch?source=master-2", { data: changes });
    const elapsed = Date.now() - started;
    expect(res.status).toBe(413);
    expect(res.body).toMatchObject({
      code: "PAYLOAD_TOO_LARGE",
      details: { max_event_bytes: 16 * 1024 * 1024 },
    });
    // Nothing written: no outbox row, the record unchanged; and the work stopped early (about 18
    // of the 500 changes), instead of 450 MB of outbox rows.
    expect(await outboxRows(t.services, before)).toEqual([]);
    const item = await olga.get("/api/v4/core/ITEM/NOTES-1?source=master-2");
    expect(item.body.data.NAME).toBe("Notes");
    expect(elapsed).toBeLessThan(20_000);
  });

  it("a lone surrogate in a string is 400 INVALID_FIELD_VALUE, not stored as U+FFFD", async () => {
    const res = await olga.post("/api/v4/core/ITEM?source=master-2", {
      data: { ITEM_ID: "SUR-1", NAME: "bad \ud800 name" },
    });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ code: "INVALID_FIELD_VALUE", field: "NAME" });
    expect((await olga.get("/api/v4/core/ITEM/SUR-1?source=master-2")).status).toBe(404);
    const paired = await olga.post("/api/v4/core/ITEM?source=master-2", {
      data: { ITEM_ID: "SUR-2", NAME: "coffee \u{1F375}", UNIT_COST: 5 },
    });
    expect(paired.status).toBe(201);
    expect(paired.body.data.NAME).toBe("coffee \u{1F375}");
  });

  it("STRING ids hold only letters, digits, '-', '_' and '.', never '..', within the field's LENGTH", async () => {
    for (const bad of ["../../etc", "a/b", "a..b", "tab\tid", "space id", "x".repeat(13), "ü-1"]) {
      const res = await olga.post("/api/v4/core/ITEM?source=master-2", {
        data: { ITEM_ID: bad, NAME: "n", UNIT_COST: 1 },
      });
      expect(res.status, bad).toBe(400);
      expect(res.body).toMatchObject({ code: "INVALID_FIELD_VALUE", field: "ITEM_ID" });
    }
    const good = await olga.post("/api/v4/core/ITEM?source=master-2", {
      data: { ITEM_ID: "ok.id-1_2", NAME: "n", UNIT_COST: 1 },
    });
    expect(good.status).toBe(201);
  });

  it("INTEGER ids in paths are canonical decimal: /PO/01 and /PO/+1 are 404, /PO/1 is the record", async () => {
    expect((await olga.get("/api/v4/core/PO/1?source=purchasing-1")).status).toBe(200);
    for (const id of ["01", "%2B1", "1.0", "1e0", " 1"]) {
      const res = await olga.get(`/api/v4/core/PO/${id}?source=purchasing-1`);
      expect(res.status, id).toBe(404);
      expect(res.body.code).toBe("RECORD_NOT_FOUND");
      expect(
        (await olga.patch(`/api/v4/core/PO/${id}?source=purchasing-1`, { data: { STATUS: "X" } })).status,
      ).toBe(404);
    }
  });

  it("a date in a filter is checked like a date in a body", async () => {
    const filter = await olga.get("/api/v4/core/PO?source=purchasing-1&filter[PO_DATE]=20261399");
    expect(filter.status).toBe(400);
    expect(filter.body).toMatchObject({ code: "INVALID_FIELD_VALUE", field: "PO_DATE" });
    const expr = await olga.get(
      `/api/v4/core/PO?source=purchasing-1&$filter=${encodeURIComponent("PO_DATE eq '20260230'")}`,
    );
    expect(expr.status).toBe(400);
    const body = await olga.post("/api/v4/core/PO?source=purchasing-1", {
      data: { SUPP_ID: 1, PO_DATE: "20261399" },
    });
    expect(body.status).toBe(400);
    expect(body.body).toMatchObject({ code: "INVALID_FIELD_VALUE", field: "PO_DATE" });
    expect((await olga.get("/api/v4/core/PO?source=purchasing-1&filter[PO_DATE]=20261103")).status).toBe(200);
  });
});
