// A create's required fields as its caller sees them (decisions.md, "A required field the caller
// may not send"): a required field the caller may not send (no N for it, or hidden by its peso)
// and no template fills is not asked of it as a 422 it could never satisfy; when only such fields
// are missing, the create is 403 INSUFFICIENT_PERMISSIONS, naming the fields the caller may know
// and never one its peso hides.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestApp, type TestApp } from "../helpers/env.ts";
import { addField, sampleFixtureWith } from "./helpers.ts";
import { type Client, clientFor, NO_RATE_LIMITS } from "./http.ts";

const CUST = "/api/v4/core/CUST?source=anag-1";

describe("required fields the caller may not send (pglite)", () => {
  let t: TestApp;
  let anna: Client; // peso 1: sees SECRET_REF and may send it
  let marco: Client; // peso 2: SECRET_REF (COD_UTENTE 1) does not exist for him

  beforeAll(async () => {
    const fixture = await sampleFixtureWith((f) => {
      addField(f, "CUST", 12, { COD_VAR: "SECRET_REF", DESC_VAR: "Secret", DATA_TYPE: "STRING", LENGTH: 20 });
      addField(f, "CUST", 13, {
        COD_VAR: "NO_N_REF",
        DESC_VAR: "Not on create",
        DATA_TYPE: "STRING",
        LENGTH: 20,
      });
      const cost = (code: string) => f.TB_COST!.find((c) => c.COD_DIM === "CUST" && c.COD_VAR === code)!;
      Object.assign(cost("SECRET_REF"), { REQUIRED: true, COD_UTENTE: 1 });
      Object.assign(cost("NO_N_REF"), { REQUIRED: true, COD_ON_OFF: "LDRM" });
      // The sample's customers hold both (the fixture's loader must pass the required check too).
      const records = (f as unknown as { records: Record<string, Array<Record<string, unknown>>> }).records;
      for (const c of records.CUST ?? [])
        Object.assign(c.data as object, { SECRET_REF: "seed", NO_N_REF: "seed" });
    });
    t = await createTestApp("pglite", { fixture, env: NO_RATE_LIMITS });
    [anna, marco] = await Promise.all([clientFor(t.app, "anna"), clientFor(t.app, "marco")]);
  });
  afterAll(async () => {
    await t?.close();
  });

  it("asks the caller only for the required fields it may send (422)", async () => {
    const res = await anna.post(CUST, { data: { NAME: "Needs a ref" } });
    expect(res.status, JSON.stringify(res.body)).toBe(422);
    expect(res.body).toMatchObject({ code: "REQUIRED_FIELD_MISSING", field: "SECRET_REF" });
    expect(JSON.stringify(res.body)).not.toContain("NO_N_REF");
  });

  it("refuses with 403 when only fields it may not send are missing, naming those it may know", async () => {
    const res = await anna.post(CUST, { data: { NAME: "Has its ref", SECRET_REF: "s-1" } });
    expect(res.status, JSON.stringify(res.body)).toBe(403);
    expect(res.body).toMatchObject({
      code: "INSUFFICIENT_PERMISSIONS",
      details: { dimension: "CUST", fields: ["NO_N_REF"] },
    });
    expect(res.body.message).toContain("NO_N_REF (without N for you)");
  });

  it("never names a field the caller's peso hides", async () => {
    const res = await marco.post(CUST, { data: { NAME: "Marco's" } });
    expect(res.status, JSON.stringify(res.body)).toBe(403);
    expect(res.body).toMatchObject({ code: "INSUFFICIENT_PERMISSIONS", details: { fields: ["NO_N_REF"] } });
    expect(res.body.message).toContain("a field your weight hides");
    expect(JSON.stringify(res.body)).not.toContain("SECRET_REF");
    // Sending it is refused as for any field it does not know (it is not one of CUST's for him).
    const sent = await marco.post(CUST, { data: { NAME: "Marco's", SECRET_REF: "s-2" } });
    expect(sent.status).toBe(400);
    expect(JSON.stringify(sent.body)).toContain("SECRET_REF");
  });
});
