// The demo data (src/demo/demo-fixture.json) over REST: cancelling a purchase order cancels its
// lines (CASCADE_DELETE), and restoring it brings them back. The restore cascade follows
// UPDATE_CASCADE (spec decisions §5: "when a record's key changes, or when it is restored, the
// same applies to the children"); the demo's PO listed POL in CASCADE_DELETE only, so a restored
// order came back without its lines.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loginAs } from "../helpers/auth.ts";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";
import { type Client, client, NO_RATE_LIMITS } from "./http.ts";

describe.each(BACKENDS)("the demo's purchase order, cancelled then restored (%s)", (backend) => {
  let t: TestApp;
  let olga: Client;

  beforeAll(async () => {
    t = await createTestApp(backend, { fixture: "demo", env: NO_RATE_LIMITS });
    olga = client(t.app, await loginAs(t.app, "olga", "olga-demo-1"));
  }, 120_000);
  afterAll(async () => {
    await t?.close();
  });

  /** The order's lines in every state, as `{POL_ID, TREC}`. */
  async function linesOf(poId: number) {
    const res = await olga.get(
      `/api/v4/core/POL?source=purchasing-2&filter[PO_ID]=${poId}&cond_trec=N,M,C&$fields=POL_ID,TREC&sort=POL_ID`,
    );
    expect(res.status).toBe(200);
    return res.body.data as Array<{ POL_ID: number; TREC: string }>;
  }

  it("a restored order has its lines again (TREC M), each restore evented in the answer", async () => {
    const orders = await olga.get("/api/v4/core/PO?source=purchasing-1&sort=PO_ID&$fields=PO_ID");
    expect(orders.status).toBe(200);
    const poId = orders.body.data[0].PO_ID as number;
    const before = await linesOf(poId);
    expect(before.length).toBeGreaterThan(0);
    expect(before.every((l) => l.TREC !== "C")).toBe(true);

    const cancelled = await olga.delete(`/api/v4/core/PO/${poId}?source=purchasing-1`);
    expect(cancelled.status).toBe(200);
    expect((await linesOf(poId)).map((l) => l.TREC)).toEqual(before.map(() => "C"));

    const restored = await olga.patch(`/api/v4/core/PO/${poId}?source=purchasing-1`, { data: { TREC: "M" } });
    expect(restored.status).toBe(200);
    expect(restored.body.data.TREC).toBe("M");
    expect(restored.body.cascaded).toHaveLength(before.length);
    expect(await linesOf(poId)).toEqual(before.map((l) => ({ POL_ID: l.POL_ID, TREC: "M" })));
  });
});
