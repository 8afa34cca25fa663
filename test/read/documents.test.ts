// Documents (spec 4.6, decisions.md §14, issue 12): the sample fixture's `listino` with and without
// its parameters, on-the-fly documents with compact true and false, a part hidden by grants (403)
// and fields hidden by peso.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";
import { graphqlClient } from "../graphql/helpers.ts";
import { loginAs, SAMPLE_USERS } from "../helpers/auth.ts";
import { type Client, clientFor, NO_RATE_LIMITS } from "../write/http.ts";

describe.each(BACKENDS)("documents (%s)", (backend) => {
  let t: TestApp;
  let anna: Client;
  let marco: Client;
  let lucia: Client;
  let greta: Client;

  beforeAll(async () => {
    t = await createTestApp(backend, { fixture: "sample", env: NO_RATE_LIMITS });
    [anna, marco, lucia, greta] = await Promise.all([
      clientFor(t.app, "anna"),
      clientFor(t.app, "marco"),
      clientFor(t.app, "lucia"),
      clientFor(t.app, "greta"),
    ]);
  });
  afterAll(async () => {
    await t?.close();
  });

  it("listino: the product with its prices; codLst and areaListino narrow the part", async () => {
    const all = await anna.get("/api/v4/document/listino/P0001?source=catalog-1");
    expect(all.status).toBe(200);
    expect(all.body.data).toMatchObject({ PROD_ID: "P0001", NAME: "Bolt M8", UNIT_PRICE: 0.12 });
    expect(Object.keys(all.body.data).sort()).toEqual(["NAME", "PROD_ID", "UNIT_PRICE", "prices"]);
    expect(all.body.data.prices).toEqual(
      expect.arrayContaining([
        { COD_LST: "STD", AREA: "NORTH", PRICE: 0.12 },
        { COD_LST: "WHS", AREA: "NORTH", PRICE: 0.09 },
      ]),
    );
    expect(all.body.data.prices).toHaveLength(2);
    const std = await anna.get("/api/v4/document/listino/P0001?source=catalog-1&codLst=STD");
    expect(std.body.data.prices).toEqual([{ COD_LST: "STD", AREA: "NORTH", PRICE: 0.12 }]);
    const south = await anna.get(
      "/api/v4/document/listino/P0001?source=catalog-1&codLst=STD&areaListino=SOUTH",
    );
    expect(south.body.data.prices).toEqual([]);
    const other = await anna.get("/api/v4/document/listino/P0002?source=catalog-1&areaListino=SOUTH");
    expect(other.body.data.prices).toEqual([{ COD_LST: "STD", AREA: "SOUTH", PRICE: 0.06 }]);
  });

  it("unknown document 404 DOCUMENT_NOT_FOUND, absent root 404 RECORD_NOT_FOUND, another tenant's root absent", async () => {
    expect((await anna.get("/api/v4/document/nope/P0001?source=catalog-1")).body).toMatchObject({
      status: 404,
      code: "DOCUMENT_NOT_FOUND",
    });
    expect((await anna.get("/api/v4/document/listino/P9999?source=catalog-1")).body).toMatchObject({
      status: 404,
      code: "RECORD_NOT_FOUND",
    });
    expect((await greta.get("/api/v4/document/listino/P0001?source=catalog-1")).status).toBe(404);
    expect((await anna.get("/api/v4/document/listino/P0001")).body).toMatchObject({
      code: "MISSING_PARAMETER",
    });
  });

  it("a part the caller holds no read grant for is 403", async () => {
    // marco reads the catalog (products) but holds nothing on price-1 (prices).
    expect((await marco.get("/api/v4/core/PROD/P0001?source=catalog-1")).status).toBe(200);
    const res = await marco.get("/api/v4/document/listino/P0001?source=catalog-1");
    expect(res.status).toBe(403);
    expect(res.body.code).toBe("INSUFFICIENT_PERMISSIONS");
  });

  it("on the fly: related dimensions through TB_OBJECT, compact leaves out audit fields and nulls", async () => {
    const cust = await anna.post("/api/v4/core/CUST?source=anag-1", {
      data: { NAME: "Document customer", CITY_ID: "MI", CREDIT_LIMIT: 5000 },
    });
    const id = cust.body.data.CUST_ID;
    await anna.post("/api/v4/core/ADDR?source=anag-2", {
      data: { CUST_ID: id, KIND: "SHIP", STREET: "Via Roma 1", CITY_ID: "MI" },
    });
    const full = await anna.post("/api/v4/document?source=anag-1", {
      dim: "CUST",
      val_key: id,
      related_dim: { ADDR: ["STREET", "CITY_ID"], CITY: ["NAME"] },
      compact: false,
    });
    expect(full.status).toBe(200);
    expect(full.body.data).toMatchObject({
      CUST_ID: id,
      NAME: "Document customer",
      CREDIT_LIMIT: 5000,
      TREC: "N",
    });
    expect(full.body.data).toHaveProperty("CDATA");
    expect(full.body.data).toHaveProperty("EMAIL", null);
    expect(full.body.data.ADDR).toEqual([{ STREET: "Via Roma 1", CITY_ID: "MI" }]);
    expect(full.body.data.CITY).toEqual([{ NAME: "Milano" }]);
    const compact = await anna.post("/api/v4/document?source=anag-1", {
      dim: "CUST",
      val_key: id,
      related_dim: { ADDR: [] },
      compact: true,
    });
    expect(compact.body.data).not.toHaveProperty("CDATA");
    expect(compact.body.data).not.toHaveProperty("OWNER");
    expect(compact.body.data).not.toHaveProperty("EMAIL");
    expect(compact.body.data.NAME).toBe("Document customer");
    expect(compact.body.data.ADDR[0]).not.toHaveProperty("CDATA");
    expect(compact.body.data.ADDR[0].STREET).toBe("Via Roma 1");

    // lucia (peso 3) reads customers: CREDIT_LIMIT (peso 2) is not hers; addresses are not granted.
    const mine = await lucia.post("/api/v4/document?source=anag-1", {
      dim: "CUST",
      val_key: id,
      related_dim: {},
    });
    expect(mine.status).toBe(200);
    expect(mine.body.data.NAME).toBe("Document customer");
    expect(mine.body.data).not.toHaveProperty("CREDIT_LIMIT");
    const refused = await lucia.post("/api/v4/document?source=anag-1", {
      dim: "CUST",
      val_key: id,
      related_dim: { ADDR: [] },
    });
    expect(refused.status).toBe(403);
  });

  it("bad on-the-fly bodies are 400 with the member named", async () => {
    const bad = [
      [{ val_key: 1 }, "dim"],
      [{ dim: "CUST" }, "val_key"],
      [{ dim: "CUST", val_key: 1, related_dim: { PROD: [] } }, "related_dim"],
      [{ dim: "CUST", val_key: 1, extra: true }, "extra"],
    ] as const;
    for (const [body, field] of bad) {
      const res = await anna.post("/api/v4/document?source=anag-1", body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.field).toBe(field);
    }
  });

  it("GraphQL: document and vars queries answer what REST answers", async () => {
    const gql = graphqlClient(
      t.app,
      await loginAs(t.app, SAMPLE_USERS.anna.username, SAMPLE_USERS.anna.password),
    );
    const res = await gql(
      `{ document(source: "catalog-1", name: "listino", key: "P0001", params: {codLst: "WHS"}) }`,
    );
    const rest = await anna.get("/api/v4/document/listino/P0001?source=catalog-1&codLst=WHS");
    expect(res.body.data.document).toEqual(rest.body.data);
    expect(res.body.data.document.prices).toEqual([{ COD_LST: "WHS", AREA: "NORTH", PRICE: 0.09 }]);
    const missing = await gql(`{ document(source: "catalog-1", name: "nope", key: "1") }`);
    expect(missing.body.errors[0].extensions).toMatchObject({ code: "DOCUMENT_NOT_FOUND", status: 404 });

    const vars = await gql(`{ vars(source: "anag-1", field: "CITY_ID", filter: "startwith(NAME,'M')") }`);
    const restVars = await anna.get(
      `/api/v4/core/vars?source=anag-1&field=CITY_ID&$filter=${encodeURIComponent("startwith(NAME,'M')")}`,
    );
    expect(vars.body.data.vars).toEqual(restVars.body);
    expect(vars.body.data.vars.length).toBeGreaterThan(0);
    const wrong = await gql(`{ vars(source: "anag-1", field: "NAME", full_list: true) }`);
    expect(wrong.body.errors[0].extensions).toMatchObject({ code: "INVALID_FIELD_TYPE", status: 400 });
  });
});
