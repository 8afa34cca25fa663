// Write results are filtered by the write resolvers, not by an adapter (issue 9): the outcome's
// `visible` record holds what the caller may read in detail, the outbox the whole stored record.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createOne, deleteOne, updateOne } from "../../src/resolvers/write/operations.ts";
import type { Services } from "../../src/services.ts";
import { createTestServices } from "../helpers/env.ts";
import { contextFor, lastOutboxId, outboxRows } from "./helpers.ts";

describe("write outcomes carry only what the caller may see", () => {
  let services: Services;
  beforeAll(async () => {
    services = await createTestServices("pglite", { fixture: "sample" });
  });
  afterAll(async () => {
    await services?.close();
  });

  it("create, update and delete return the D fields; the outbox keeps the stored record", async () => {
    const ctx = contextFor("anna", "anag-1");
    const before = await lastOutboxId(services);
    const created = await createOne(services, ctx, "CUST", { NAME: "Outcome Srl", EMAIL: "o@x.example" });
    expect(created.visible).toMatchObject({ NAME: "Outcome Srl", EMAIL: "o@x.example", TREC: "N" });
    // RISK_SCORE (flag R only) and INTERNAL (no flags) are stored, never shown.
    expect(created.record).toHaveProperty("RISK_SCORE");
    expect(created.record).toHaveProperty("INTERNAL");
    expect(created.visible).not.toHaveProperty("RISK_SCORE");
    expect(created.visible).not.toHaveProperty("INTERNAL");
    const [event] = await outboxRows(services, before);
    expect(event!.PAYLOAD).toHaveProperty("INTERNAL");

    const id = created.recordId;
    const updated = await updateOne(services, ctx, "CUST", id, { NAME: "Outcome 2" }, "patch");
    expect(updated.visible).toMatchObject({ NAME: "Outcome 2", TREC: "M" });
    expect(updated.visible).not.toHaveProperty("INTERNAL");
    const soft = await deleteOne(services, ctx, "CUST", id, false);
    expect(soft.visible).toMatchObject({ CUST_ID: id, TREC: "C" });
    expect(soft.visible).not.toHaveProperty("NAME");
    const force = await deleteOne(services, ctx, "CUST", id, true);
    expect(force.visible).toBeNull();
  });
});
