// The write pipeline at resolver level: a failure injected at each step of each operation leaves
// the database exactly as it was (records, outbox rows, sequence numbers).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { batchCreate } from "../../src/resolvers/write/batch.ts";
import { runCoreBatch } from "../../src/resolvers/write/core-batch.ts";
import { createOne, deleteOne, updateOne } from "../../src/resolvers/write/operations.ts";
import type { WriteOptions } from "../../src/resolvers/write/pipeline.ts";
import type { Services } from "../../src/services.ts";
import type { WriteStep } from "../../src/types.ts";
import { BACKENDS, createTestServices } from "../helpers/env.ts";
import { contextFor, lastOutboxId, outboxRows, row, sampleFixtureWith, setRow, snapshot } from "./helpers.ts";

class InjectedFailure extends Error {}

/** Throws at the n-th step the pipeline announces (0-based); records every step seen. */
function failAt(n: number, seen: WriteStep[] = []): WriteOptions {
  return {
    onStep(step) {
      seen.push(step);
      if (seen.length - 1 === n) throw new InjectedFailure(`injected at ${step}`);
    },
  };
}

/** A create's steps, in the order it runs them. */
const CREATE_STEPS = [
  "authorize",
  "metadata",
  "templates",
  "field_rules",
  "types",
  "required",
  "foreign_keys",
  "record",
  "outbox",
  "cascades",
  "commit",
];
describe.each(BACKENDS)("write pipeline (%s)", (backend) => {
  let services: Services;
  const anna = contextFor("anna", "erp");

  beforeAll(async () => {
    const fixture = await sampleFixtureWith((f) => {
      setRow(f.TB_DIM, { COD_DIM: "CITY" }, { UPDATE_CASCADE: "CUST,ADDR" });
      setRow(f.TB_DIM, { COD_DIM: "CUST" }, { UPDATE_CASCADE: "ADDR" });
      setRow(f.TB_COST, { COD_DIM: "CITY", COD_VAR: "CITY_ID" }, { COD_ON_OFF: "LDRNM" });
      setRow(f.TB_DIM, { COD_DIM: "LST" }, { AUDIT_STYLE: "CREATED" });
    });
    services = await createTestServices(backend, { fixture });
  });
  afterAll(async () => {
    await services?.close();
  });

  /**
   * Runs `operation` once failing at its last step (commit) to learn its steps, then once per
   * step failing there; after each run the database must be as before.
   */
  async function expectAtomicAtEveryStep(operation: (opts: WriteOptions) => Promise<unknown>) {
    const before = await snapshot(services);
    const steps: WriteStep[] = [];
    const learn: WriteOptions = {
      onStep(step) {
        steps.push(step);
        if (step === "commit") throw new InjectedFailure("injected at commit");
      },
    };
    await expect(operation(learn)).rejects.toBeInstanceOf(InjectedFailure);
    expect(await snapshot(services)).toEqual(before);
    for (let n = 0; n < steps.length - 1; n++) {
      const seen: WriteStep[] = [];
      await expect(operation(failAt(n, seen)), `failure at step ${n} (${steps[n]})`).rejects.toBeInstanceOf(
        InjectedFailure,
      );
      expect(seen.at(-1)).toBe(steps[n]);
      expect(await snapshot(services), `database after a failure at ${steps[n]}`).toEqual(before);
    }
    return steps;
  }

  it("creates a record with audit fields, a template value and one outbox row", async () => {
    const last = await lastOutboxId(services);
    const result = await createOne(services, anna, "CUST", { NAME: "Pipeline Srl", CITY_ID: "MI" });
    expect(result.record).toMatchObject({ NAME: "Pipeline Srl", TREC: "N", OWNER: "anna", CODE: "C-00005" });
    expect(result.record.CDATA).toMatch(/^\d{14}$/);
    const events = await outboxRows(services, last);
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({
      EVENT_TYPE: "CUSTCreated",
      AGGREGATE_TYPE: "CUST",
      AGGREGATE_ID: String(result.recordId),
      TENANT_ID: "acme",
      PUBLISHED_AT: null,
    });
    expect(events[0]!.PAYLOAD).toMatchObject({ NAME: "Pipeline Srl", TREC: "N" });
    expect(String(events[0]!.OUTBOX_ID)).toBe(result.eventId);
  });

  it("keeps sequences per tenant", async () => {
    const values = async () =>
      Object.fromEntries(
        (
          await services.db.query(`SELECT "TENANT_ID", "VALUE" FROM "TB_SEQUENCE" WHERE "SEQ_NAME" = 'CUST'`)
        ).rows.map((r) => [r.TENANT_ID, Number(r.VALUE)]),
      );
    const before = await values();
    const created = await createOne(services, contextFor("greta", "anag-1"), "CUST", {
      NAME: "Globex Kunde",
    });
    const after = await values();
    expect(after).toEqual({ ...before, globex: (before.globex ?? 0) + 1 });
    expect(created.record).toMatchObject({
      CODE: `C-${String(after.globex).padStart(5, "0")}`,
      OWNER: "greta",
    });
  });

  it("sets the CREATED-style audit fields on create, update, soft delete and restore", async () => {
    const ctx = contextFor("anna", "catalog-2");
    const marco = contextFor("marco", "anag");
    const created = await createOne(services, ctx, "LST", { COD_LST: "AUD", DESC_LST: "Audited" });
    expect(created.record).toMatchObject({
      TREC: "N",
      CREATED_BY: "anna",
      UPDATED_BY: null,
      DELETED_BY: null,
    });
    expect(created.record.CREATED_AT).toMatch(/^\d{14}$/);
    expect(created.record).not.toHaveProperty("CDATA");
    const updated = await updateOne(services, ctx, "LST", "AUD", { DESC_LST: "Changed" }, "patch");
    expect(updated.record).toMatchObject({ TREC: "M", UPDATED_BY: "anna", CREATED_BY: "anna" });
    const deleted = await deleteOne(services, ctx, "LST", "AUD", false);
    expect(deleted.record).toMatchObject({ TREC: "C", DELETED_BY: "anna", UPDATED_BY: "anna" });
    expect(deleted.record.DELETED_AT).toMatch(/^\d{14}$/);
    const restored = await updateOne(services, ctx, "LST", "AUD", { TREC: "M" }, "patch");
    expect(restored.record).toMatchObject({ TREC: "M", DELETED_BY: null, DELETED_AT: null });
    await expect(updateOne(services, marco, "LST", "AUD", { DESC_LST: "x" }, "patch")).rejects.toMatchObject({
      status: 403,
    });
  });

  it("leaves nothing behind when a create with an insert cascade fails at any step", async () => {
    const steps = await expectAtomicAtEveryStep((opts) =>
      createOne(services, anna, "ORD", { CUST_ID: 1, ORDL: [{ PROD_ID: "P0001", QTY: 3 }] }, opts),
    );
    expect(new Set(steps)).toEqual(new Set(CREATE_STEPS));
  });

  it("leaves nothing behind when a plain create (on PostgreSQL one statement, its own transaction) fails at any step", async () => {
    const steps = await expectAtomicAtEveryStep((opts) =>
      createOne(services, anna, "CUST", { NAME: "Atomic", CITY_ID: "MI" }, opts),
    );
    // Every step comes before the statement that commits it: "commit" last of all.
    expect(steps).toEqual(CREATE_STEPS);
  });

  it("leaves nothing behind when an update with a key-change cascade fails at any step", async () => {
    await createOne(services, anna, "CITY", { CITY_ID: "KEY1", NAME: "Keyville", COUNTRY: "IT" });
    await createOne(services, anna, "CUST", { NAME: "Key Customer", CITY_ID: "KEY1" });
    const steps = await expectAtomicAtEveryStep((opts) =>
      updateOne(services, anna, "CITY", "KEY1", { CITY_ID: "KEY2" }, "patch", opts),
    );
    expect(steps).toContain("load");
    expect(steps.filter((s) => s === "outbox").length).toBe(2);
    const done = await updateOne(services, anna, "CITY", "KEY1", { CITY_ID: "KEY2" }, "patch");
    expect(done.cascaded).toHaveLength(1);
    expect(done.cascaded[0]).toMatchObject({ dim: "CUST", action: "updated" });
    expect(done.cascaded[0]!.record).toMatchObject({ CITY_ID: "KEY2", TREC: "M", LOWNER: "anna" });
  });

  it("leaves nothing behind when a soft delete with its cascade fails at any step", async () => {
    const cust = await createOne(services, anna, "CUST", { NAME: "Doomed Srl" });
    await createOne(services, contextFor("anna", "anag-2"), "ADDR", { CUST_ID: cust.recordId, KIND: "BILL" });
    const steps = await expectAtomicAtEveryStep((opts) =>
      deleteOne(services, anna, "CUST", cust.recordId, false, opts),
    );
    expect(steps.filter((s) => s === "outbox").length).toBe(2);
    await deleteOne(services, anna, "CUST", cust.recordId, false);
    expect((await row(services, "TB_ANAG_CUST00", "CUST_ID", cust.recordId))?.TREC).toBe("C");
  });

  it("leaves nothing behind when a force delete fails at any step", async () => {
    const cust = await createOne(services, anna, "CUST", { NAME: "Gone Srl" });
    await expectAtomicAtEveryStep((opts) => deleteOne(services, anna, "CUST", cust.recordId, true, opts));
    await deleteOne(services, anna, "CUST", cust.recordId, true);
    expect(await row(services, "TB_ANAG_CUST00", "CUST_ID", cust.recordId)).toBeUndefined();
  });

  it("leaves nothing behind when a batch or a multi-operation batch fails at any step", async () => {
    await expectAtomicAtEveryStep((opts) =>
      batchCreate(services, anna, "CUST", [{ NAME: "Batch A" }, { NAME: "Batch B" }], opts),
    );
    await expectAtomicAtEveryStep((opts) =>
      runCoreBatch(
        services,
        anna,
        {
          operations: [
            { ref: "c", method: "POST", dim: "CUST", data: { NAME: "Core Batch Srl" } },
            { method: "PATCH", dim: "CUST", id: "@{c}", data: { VIP: true } },
          ],
        },
        opts,
      ),
    );
  });
});
