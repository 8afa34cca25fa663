// A field's own weight (its default TB_COST row's COD_UTENTE) holds in every form: a form's row
// (CENTER_DETT) without COD_UTENTE showed the field to anyone who named that form in
// `center_dett`, which is the caller's choice (exploratory security test: sara read PO.TOTAL, nora
// wrote POL.PRICE). A form's row may weigh a field further, never lift its weight.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestApp, type TestApp } from "../helpers/env.ts";
import { type Client, clientFor, NO_RATE_LIMITS } from "../write/http.ts";

describe("a form's TB_COST row does not lift a field's weight (pglite)", () => {
  let t: TestApp;
  let anna: Client;
  let lucia: Client;
  let marco: Client;
  beforeAll(async () => {
    t = await createTestApp("pglite", { fixture: "sample", env: NO_RATE_LIMITS });
    anna = await clientFor(t.app, "anna");
    lucia = await clientFor(t.app, "lucia");
    marco = await clientFor(t.app, "marco");
    // CUST.CREDIT_LIMIT is weighted 2 by its default row; a form row for it gives no weight.
    const form = await anna.post("/api/v4/core/COST?source=erp", {
      data: {
        COD_DIM: "CUST",
        NUM_COST: 40,
        COD_VAR: "CREDIT_LIMIT",
        COD_ON_OFF: "LDM",
        CENTER_DETT: "FORMX",
      },
    });
    expect(form.status).toBe(201);
    expect(form.body.data.COD_UTENTE).toBeNull();
  });
  afterAll(async () => {
    await t?.close();
  });

  it("peso 3 (lucia) reads no CREDIT_LIMIT through the form, in a list, a record or GraphQL; peso 2 (marco) does", async () => {
    const list = await lucia.get("/api/v4/core/CUST?source=anag-1&center_dett=FORMX");
    expect(list.status).toBe(200);
    expect(list.body.data.length).toBeGreaterThan(0);
    for (const row of list.body.data) expect(row).not.toHaveProperty("CREDIT_LIMIT");
    const id = list.body.data[0].CUST_ID;
    const one = await lucia.get(`/api/v4/core/CUST/${id}?source=anag-1&center_dett=FORMX`);
    expect(one.status).toBe(200);
    expect(one.body.data).not.toHaveProperty("CREDIT_LIMIT");
    const asked = await lucia.get(
      "/api/v4/core/CUST?source=anag-1&center_dett=FORMX&$fields=NAME,CREDIT_LIMIT",
    );
    expect(asked.status).toBe(400);
    const gql = await lucia.post("/graphql", {
      query: `{ CUST(source: "anag-1", center_dett: "FORMX", limit: 1) { data { CREDIT_LIMIT } } }`,
    });
    expect(gql.body.errors?.[0]?.extensions?.code).toBe("GRAPHQL_VALIDATION_FAILED");

    const marcos = await marco.get(`/api/v4/core/CUST/${id}?source=anag-1&center_dett=FORMX`);
    expect(marcos.status).toBe(200);
    expect(marcos.body.data).toHaveProperty("CREDIT_LIMIT");
  });
});
