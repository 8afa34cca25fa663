// Metadata is shared by the tenants of a database, so is the right to change it (issue 8,
// decisions §6): only a grant with the operation `metadata` at level 4 may change it. The sequence
// a tenant admin once used to read another tenant's data is refused at its first step.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loginAs } from "../helpers/auth.ts";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";
import { type Client, client, NO_RATE_LIMITS } from "./http.ts";

const DEMO_PASSWORDS = {
  ada: "ada-platform-0",
  olga: "olga-demo-1",
  sara: "sara-demo-3",
  kai: "kai-demo-4",
} as const;

describe.each(BACKENDS)("metadata writes need the metadata grant (%s)", (backend) => {
  let t: TestApp;
  const as: Partial<Record<keyof typeof DEMO_PASSWORDS, Client>> = {};

  beforeAll(async () => {
    t = await createTestApp(backend, { fixture: "demo", env: NO_RATE_LIMITS });
    for (const [user, password] of Object.entries(DEMO_PASSWORDS)) {
      as[user as keyof typeof DEMO_PASSWORDS] = client(t.app, await loginAs(t.app, user, password));
    }
  });
  afterAll(async () => {
    await t?.close();
  });

  it("the bakery's admin cannot repoint a menu node nor clear a field weight (403 metadata)", async () => {
    const kai = as.kai!;
    const repoint = await kai.patch("/api/v4/core/MENU/master-2?source=ops", { data: { COD_DIM: "SUPP" } });
    expect(repoint.status).toBe(403);
    expect(repoint.body).toMatchObject({
      code: "INSUFFICIENT_PERMISSIONS",
      status: 403,
      required_grant: "metadata",
    });
    const weight = await kai.patch("/api/v4/core/COST/ITEM/4?source=ops", { data: { COD_UTENTE: null } });
    expect(weight.status).toBe(403);
    expect(weight.body.required_grant).toBe("metadata");
    // Nothing changed: the roastery's level-1 user still cannot read suppliers through master-2,
    // nor see the cost prices of items.
    const sara = as.sara!;
    const suppliers = await sara.get("/api/v4/core/SUPP?source=master-2");
    expect(suppliers.status).toBe(403);
    const items = await sara.get("/api/v4/core/ITEM?source=master-2");
    expect(items.status).toBe(200);
    expect(items.body.data.length).toBeGreaterThan(0);
    for (const item of items.body.data) expect(item).not.toHaveProperty("UNIT_COST");
  });

  it("a tenant admin's level 4 still covers her own data, not metadata", async () => {
    const olga = as.olga!;
    const dim = await olga.post("/api/v4/core/VAR?source=ops", {
      data: { COD_DIM: "ITEM", COD_VAR: "NOTE", DATA_TYPE: "STRING", LENGTH: 40, NUM_VAR: 90 },
    });
    expect(dim.status).toBe(403);
    expect(dim.body.required_grant).toBe("metadata");
    const patch = await olga.patch("/api/v4/core/ITEM/GC-0001?source=master-2", { data: { NAME: "Huila" } });
    expect(patch.status).toBe(200);
  });

  it("the platform administrator may change metadata", async () => {
    const ada = as.ada!;
    const res = await ada.patch("/api/v4/core/MENU/master-2?source=ops", {
      data: { DESC_MENU: "Items (green)" },
    });
    expect(res.status).toBe(200);
    const menu = await t.services.db.query<{ DESC_MENU: string }>(
      `SELECT "DESC_MENU" FROM "TB_MENU" WHERE "COD_MENU" = 'master-2'`,
    );
    expect(menu.rows[0]!.DESC_MENU).toBe("Items (green)");
  });
});
