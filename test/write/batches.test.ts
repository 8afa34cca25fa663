// HTTP: batches on one dimension (partial success, one savepoint per record) and the
// multi-operation /core/batch (all or nothing, references to earlier operations).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";
import { expectInvalidParameter } from "../helpers/error-body.ts";
import { lastOutboxId, outboxRows, row, snapshot } from "./helpers.ts";
import { type Client, clientFor, NO_RATE_LIMITS } from "./http.ts";

const MAX = 5;

describe.each(BACKENDS)("batches over HTTP (%s)", (backend) => {
  let t: TestApp;
  let anna: Client;
  let marco: Client;
  const cust = (id: unknown) => row(t.services, "TB_ANAG_CUST00", "CUST_ID", id);

  beforeAll(async () => {
    t = await createTestApp(backend, {
      fixture: "sample",
      env: { ...NO_RATE_LIMITS, MAX_BATCH_SIZE: String(MAX) },
    });
    [anna, marco] = await Promise.all([clientFor(t.app, "anna"), clientFor(t.app, "marco")]);
  });
  afterAll(async () => {
    await t?.close();
  });

  it("POST /{dim}/batch creates the good records and reports the bad ones", async () => {
    const last = await lastOutboxId(t.services);
    const res = await anna.post("/api/v4/core/CUST/batch?source=anag-1", {
      data: [
        { NAME: "Batch A" },
        { EMAIL: "no-name@x.example" },
        { NAME: "Batch C", CITY_ID: "XX" },
        { NAME: "Batch D" },
        7,
      ],
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ success: 2, failed: 3 });
    const [a, b, c, d, e] = res.body.results;
    expect(a).toMatchObject({
      index: 0,
      status: "created",
      id: expect.any(Number),
      event_id: expect.any(String),
    });
    expect(b).toMatchObject({
      index: 1,
      status: "failed",
      error: { code: "REQUIRED_FIELD_MISSING", status: 422 },
    });
    expect(c).toMatchObject({
      status: "failed",
      error: { code: "INVALID_FOREIGN_KEY", field: "CITY_ID", status: 400 },
    });
    expect(d).toMatchObject({ index: 3, status: "created" });
    expect(e).toMatchObject({ index: 4, status: "failed", error: { code: "INVALID_REQUEST" } });
    const storedA = await cust(a.id);
    const storedD = await cust(d.id);
    expect(storedA).toMatchObject({ NAME: "Batch A", TREC: "N", OWNER: "anna" });
    expect(storedD).toMatchObject({ NAME: "Batch D" });
    // The failed records gave their sequence numbers back: A and D hold consecutive codes.
    const seq = (code: unknown) => Number(String(code).slice(2));
    expect(seq(storedD?.CODE)).toBe(seq(storedA?.CODE) + 1);
    const events = await outboxRows(t.services, last);
    expect(events.map((ev) => [ev.EVENT_TYPE, ev.AGGREGATE_ID])).toEqual([
      ["CUSTCreated", String(a.id)],
      ["CUSTCreated", String(d.id)],
    ]);
  });

  it("PATCH /{dim}/batch updates each record named by id (or its id field) and reports the bad ones", async () => {
    const created = await anna.post("/api/v4/core/CUST/batch?source=anag-1", {
      data: [{ NAME: "P1" }, { NAME: "P2" }],
    });
    const [p1, p2] = created.body.results.map((r: { id: number }) => r.id);
    const res = await anna.patch("/api/v4/core/CUST/batch?source=anag-1", {
      data: [
        { id: p1, NAME: "P1 renamed" },
        { id: 99999999, NAME: "ghost" },
        { id: p2, CODE: "not modifiable" },
        { CUST_ID: p2, VIP: true },
        { NAME: "no id" },
      ],
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ success: 2, failed: 3 });
    expect(res.body.results.map((r: { status: string }) => r.status)).toEqual([
      "updated",
      "failed",
      "failed",
      "updated",
      "failed",
    ]);
    expect(res.body.results[1]).toMatchObject({
      id: 99999999,
      error: { code: "RECORD_NOT_FOUND", status: 404 },
    });
    expect(res.body.results[2].error).toMatchObject({ code: "FIELD_NOT_MODIFIABLE", field: "CODE" });
    expect(await cust(p1)).toMatchObject({ NAME: "P1 renamed", TREC: "M" });
    expect(await cust(p2)).toMatchObject({ NAME: "P2", VIP: true, TREC: "M" });
  });

  it("POST /{dim}/batch-delete deletes soft or force, per record", async () => {
    const created = await anna.post("/api/v4/core/CUST/batch?source=anag-1", {
      data: [{ NAME: "D1" }, { NAME: "D2" }, { NAME: "D3" }],
    });
    const [d1, d2, d3] = created.body.results.map((r: { id: number }) => r.id);
    const soft = await marco.post("/api/v4/core/CUST/batch-delete?source=anag-1", {
      ids: [d1, 99999999, "abc", d2],
    });
    expect(soft.status).toBe(200);
    expect(soft.body).toMatchObject({ success: 2, failed: 2 });
    expect(soft.body.results[0]).toMatchObject({ id: d1, status: "deleted", event_id: expect.any(String) });
    expect(soft.body.results[2]).toMatchObject({
      id: "abc",
      status: "failed",
      error: { code: "RECORD_NOT_FOUND" },
    });
    expect(await cust(d1)).toMatchObject({ TREC: "C", LOWNER: "marco" });
    const again = await marco.post("/api/v4/core/CUST/batch-delete?source=anag-1", { ids: [d1] });
    expect(again.body.results[0].error).toMatchObject({ code: "INVALID_STATE_TRANSITION" });

    const denied = await marco.post("/api/v4/core/CUST/batch-delete?source=anag-1", {
      ids: [d3],
      force: true,
    });
    expect(denied.status).toBe(403);
    expect(await cust(d3)).toBeDefined();
    const force = await anna.post("/api/v4/core/CUST/batch-delete?source=anag-1", {
      ids: [d1, d3],
      force: true,
    });
    expect(force.body).toMatchObject({ success: 2, failed: 0 });
    expect(await cust(d1)).toBeUndefined();
    expect(await cust(d3)).toBeUndefined();
  });

  it("batch-delete reads force from its body only: force in the query string is 400 INVALID_PARAMETER", async () => {
    const created = await anna.post("/api/v4/core/CUST/batch?source=anag-1", { data: [{ NAME: "Q1" }] });
    const [q1] = created.body.results.map((r: { id: number }) => r.id);
    for (const value of ["true", "false", "1"]) {
      const res = await anna.post(`/api/v4/core/CUST/batch-delete?source=anag-1&force=${value}`, {
        ids: [q1],
      });
      expectInvalidParameter(
        res,
        {
          field: "force",
          message:
            "force goes in the body of batch-delete ({ids: [...], force: true}, spec 4.3), not in the query string; the query string's force is not read.",
        },
        value,
      );
    }
    // Not even soft-deleted: the request was refused whole.
    expect(await cust(q1)).toMatchObject({ TREC: "N" });
    const force = await anna.post("/api/v4/core/CUST/batch-delete?source=anag-1", { ids: [q1], force: true });
    expect(force.body).toMatchObject({ success: 1, failed: 0 });
    expect(await cust(q1)).toBeUndefined();
  });

  /** A customer with `n` addresses (CUST cascades its deletes to ADDR in the sample). */
  async function customerWithAddresses(n: number): Promise<{ custId: number; addrIds: number[] }> {
    const c = await anna.post("/api/v4/core/CUST?source=anag-1", { data: { NAME: "Cascading Srl" } });
    const addrIds: number[] = [];
    for (let i = 0; i < n; i++) {
      const a = await anna.post("/api/v4/core/ADDR?source=anag-2", {
        data: { CUST_ID: c.body.data.CUST_ID, KIND: `K${i}` },
      });
      expect(a.status).toBe(201);
      addrIds.push(a.body.data.ADDR_ID);
    }
    return { custId: c.body.data.CUST_ID, addrIds };
  }

  it("batch items and /core/batch results carry `cascaded` as a single write's answer does", async () => {
    const one = await customerWithAddresses(2);
    const bare = await customerWithAddresses(0);
    const last = await lastOutboxId(t.services);
    const res = await anna.post("/api/v4/core/CUST/batch-delete?source=anag-1", {
      ids: [one.custId, bare.custId],
    });
    expect(res.body).toMatchObject({ success: 2, failed: 0 });
    const events = await outboxRows(t.services, last);
    expect(events.map((e) => e.EVENT_TYPE)).toEqual([
      "CUSTDeleted",
      "ADDRDeleted",
      "ADDRDeleted",
      "CUSTDeleted",
    ]);
    expect(res.body.results[0].cascaded).toEqual(
      one.addrIds.map((id, i) => ({
        dimension: "ADDR",
        id,
        action: "deleted",
        trec: "C",
        event_id: String(events[i + 1]!.OUTBOX_ID),
      })),
    );
    // As a single write: no member when cascades changed nothing.
    expect(res.body.results[1]).not.toHaveProperty("cascaded");

    const two = await customerWithAddresses(1);
    const since = await lastOutboxId(t.services);
    const core = await anna.post("/api/v4/core/batch?source=anag-1", {
      operations: [
        { method: "PATCH", dim: "CUST", id: two.custId, data: { NOTES: "going" } },
        { method: "DELETE", dim: "CUST", id: two.custId, force: true },
      ],
    });
    expect(core.status, JSON.stringify(core.body)).toBe(200);
    const coreEvents = await outboxRows(t.services, since);
    expect(core.body.results[0]).not.toHaveProperty("cascaded");
    expect(core.body.results[1].cascaded).toEqual([
      {
        dimension: "ADDR",
        id: two.addrIds[0],
        action: "deleted",
        trec: null,
        event_id: String(coreEvents[2]!.OUTBOX_ID),
      },
    ]);
  });

  it("refuses a batch over the maximum size with 413, and malformed batch bodies with 400", async () => {
    const items = Array.from({ length: MAX + 1 }, (_, i) => ({ NAME: `Big ${i}` }));
    const big = await anna.post("/api/v4/core/CUST/batch?source=anag-1", { data: items });
    expect(big.status).toBe(413);
    expect(big.body).toMatchObject({ code: "PAYLOAD_TOO_LARGE", status: 413, error: "PayloadTooLarge" });
    const bigDelete = await anna.post("/api/v4/core/CUST/batch-delete?source=anag-1", {
      ids: [1, 2, 3, 4, 5, 6],
    });
    expect(bigDelete.status).toBe(413);
    const ops = Array.from({ length: MAX + 1 }, () => ({ method: "POST", dim: "CUST", data: { NAME: "x" } }));
    expect((await anna.post("/api/v4/core/batch?source=anag-1", { operations: ops })).status).toBe(413);
    const exactly = await anna.post("/api/v4/core/CUST/batch?source=anag-1", { data: items.slice(0, MAX) });
    expect(exactly.body).toMatchObject({ success: MAX, failed: 0 });
    for (const payload of [{}, { data: {} }, { data: "x" }]) {
      const res = await anna.post("/api/v4/core/CUST/batch?source=anag-1", payload);
      expect(res.status).toBe(400);
      expect(res.body.code).toBe("INVALID_REQUEST");
    }
  });

  describe("POST /api/v4/core/batch", () => {
    it("runs operations across dimensions in one transaction; later ones refer to earlier ones' records", async () => {
      const last = await lastOutboxId(t.services);
      const res = await anna.post("/api/v4/core/batch?source=erp", {
        operations: [
          { ref: "cust", method: "POST", dim: "CUST", data: { NAME: "Core Batch Srl", CITY_ID: "MI" } },
          {
            ref: "bill",
            method: "post",
            dim: "ADDR",
            source: "anag-2",
            data: { CUST_ID: "@{cust}", KIND: "BILL" },
          },
          {
            method: "PATCH",
            dim: "CUST",
            id: "@{cust}",
            data: { NOTES: "@{cust.CODE}", EMAIL: "@{cust.NAME}" },
          },
          { method: "DELETE", dim: "ADDR", id: "@{1}" },
        ],
      });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body.success).toBe(4);
      const [c, a, p, d] = res.body.results;
      expect(c).toMatchObject({ index: 0, ref: "cust", method: "POST", dimension: "CUST", status: 201 });
      expect(c.data).toMatchObject({ NAME: "Core Batch Srl", TREC: "N" });
      expect(a).toMatchObject({ index: 1, ref: "bill", dimension: "ADDR", status: 201 });
      expect(a.data).toMatchObject({ CUST_ID: c.id, KIND: "BILL" });
      expect(p).toMatchObject({ method: "PATCH", id: c.id, status: 200 });
      expect(p.data).toMatchObject({ NOTES: c.data.CODE, EMAIL: "Core Batch Srl", TREC: "M" });
      expect(d).toMatchObject({ method: "DELETE", id: a.id, status: 200 });
      expect(await row(t.services, "TB_ANAG_ADDR00", "ADDR_ID", a.id)).toMatchObject({ TREC: "C" });
      const events = await outboxRows(t.services, last);
      expect(events.map((e) => e.EVENT_TYPE)).toEqual([
        "CUSTCreated",
        "ADDRCreated",
        "CUSTUpdated",
        "ADDRDeleted",
      ]);
    });

    it("writes nothing when operation 3 of 4 fails, and names the operation", async () => {
      const before = await snapshot(t.services);
      const res = await anna.post("/api/v4/core/batch?source=erp", {
        operations: [
          { ref: "c", method: "POST", dim: "CUST", data: { NAME: "Rolled Back Srl" } },
          { method: "POST", dim: "ADDR", data: { CUST_ID: "@{c}", KIND: "BILL" } },
          { method: "PATCH", dim: "CUST", id: "@{c}", data: { CODE: "not modifiable" } },
          { method: "POST", dim: "CITY", data: { CITY_ID: "RB", NAME: "Rollback", COUNTRY: "IT" } },
        ],
      });
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({
        code: "FIELD_NOT_MODIFIABLE",
        field: "CODE",
        status: 400,
        details: { operation: 2 },
      });
      expect(res.body.message).toContain("Operation 2");
      expect(await snapshot(t.services)).toEqual(before);
      const required = await anna.post("/api/v4/core/batch?source=erp", {
        operations: [
          { method: "POST", dim: "CUST", data: { NAME: "Also Rolled Back" } },
          { method: "POST", dim: "CUST", data: {} },
        ],
      });
      expect(required.status).toBe(422);
      expect(required.body.details).toMatchObject({ operation: 1 });
      expect(await snapshot(t.services)).toEqual(before);
    });

    it("authorizes every operation first and refuses malformed payloads and references", async () => {
      const before = await snapshot(t.services);
      const denied = await marco.post("/api/v4/core/batch?source=anag-1", {
        operations: [
          { method: "POST", dim: "CUST", data: { NAME: "Marco Srl" } },
          { method: "POST", dim: "PROD", source: "catalog-1", data: { NAME: "Nope", UNIT_PRICE: 1 } },
        ],
      });
      expect(denied.status).toBe(403);
      expect(denied.body).toMatchObject({ code: "INSUFFICIENT_PERMISSIONS", details: { operation: 1 } });
      const malformed = await anna.post("/api/v4/core/batch?source=erp", {
        operations: [{ method: "GET", dim: "CUST" }, { method: "PATCH", dim: "CUST", data: {} }, "x"],
      });
      expect(malformed.status).toBe(400);
      expect(malformed.body.code).toBe("INVALID_REQUEST");
      expect(malformed.body.errors.map((e: { field: string }) => e.field)).toEqual(
        expect.arrayContaining(["operations.0.method", "operations.1.id"]),
      );
      expect((await anna.post("/api/v4/core/batch?source=erp", { ops: [] })).status).toBe(400);
      const badRef = await anna.post("/api/v4/core/batch?source=erp", {
        operations: [
          { method: "POST", dim: "CUST", data: { NAME: "Ref" } },
          { method: "PATCH", dim: "CUST", id: "@{later}", data: { NOTES: "x" } },
          { ref: "later", method: "POST", dim: "CUST", data: { NAME: "Later" } },
        ],
      });
      expect(badRef.status).toBe(400);
      expect(badRef.body).toMatchObject({ code: "INVALID_REFERENCE", details: { operation: 1 } });
      expect(await snapshot(t.services)).toEqual(before);
    });

    it("refuses an id on a POST operation (it was ignored) as a malformed operation", async () => {
      const before = await snapshot(t.services);
      const res = await anna.post("/api/v4/core/batch?source=anag-1", {
        operations: [
          { method: "POST", dim: "CUST", data: { NAME: "Fine" } },
          { method: "POST", dim: "CUST", id: 77, data: { NAME: "Id given" } },
        ],
      });
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ code: "INVALID_REQUEST", field: "operations.1.id" });
      expect(res.body.errors).toEqual([
        { field: "operations.1.id", message: expect.stringContaining("POST") },
      ]);
      expect(await snapshot(t.services)).toEqual(before);
    });

    it("names the reference in every INVALID_REFERENCE, beside the operation's index and ref", async () => {
      const refused = async (reference: string, ref?: string) => {
        const res = await anna.post("/api/v4/core/batch?source=anag-1", {
          operations: [
            { ref: "a", method: "POST", dim: "CUST", data: { NAME: "Referenced" } },
            { ...(ref ? { ref } : {}), method: "POST", dim: "CUST", data: { NAME: "x", NOTES: reference } },
          ],
        });
        expect(res.status).toBe(400);
        expect(res.body.code).toBe("INVALID_REFERENCE");
        return res.body.details;
      };
      // A field the record lacks, a ref no operation has, the operation's own ref (not earlier).
      for (const reference of ["@{a.NOPE}", "@{zz}", "@{b}"]) {
        expect(await refused(reference, "b"), reference).toEqual({ operation: 1, ref: "b", reference });
        expect(await refused(reference), reference).toEqual({ operation: 1, reference });
      }
    });
  });
});
