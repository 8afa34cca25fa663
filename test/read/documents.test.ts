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

  it("a query parameter the document does not define is 400 INVALID_PARAMETER naming it", async () => {
    for (const name of ["foo", "$fields", "codlst", "filter[COD_LST]"]) {
      const res = await anna.get(
        `/api/v4/document/listino/P0001?source=catalog-1&codLst=STD&${encodeURIComponent(name)}=1`,
      );
      expect(res.status, name).toBe(400);
      expect(res.body, name).toEqual({
        error: "BadRequest",
        code: "INVALID_PARAMETER",
        status: 400,
        field: name,
        message: `${name} is not a parameter of document listino, which takes codLst, areaListino (besides compact and the request's context, source among it).`,
      });
    }
    // The document's own parameters, compact and the context are taken.
    const taken = await anna.get(
      "/api/v4/document/listino/P0001?source=catalog-1&center_dett=HQ&codLst=STD&areaListino=NORTH&compact=false",
    );
    expect(taken.status).toBe(200);
    expect(taken.body.data.prices).toEqual([{ COD_LST: "STD", AREA: "NORTH", PRICE: 0.12 }]);
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

  it("an absent root is the RECORD_NOT_FOUND body of history and commands: details {dimension, id}", async () => {
    const stored = await anna.get("/api/v4/document/listino/P9999?source=catalog-1");
    expect(stored.status).toBe(404);
    expect(stored.body).toEqual({
      error: "NotFound",
      code: "RECORD_NOT_FOUND",
      status: 404,
      message: "PROD P9999 does not exist.",
      details: { dimension: "PROD", id: "P9999" },
    });
    // Another tenant's root is absent alike.
    const other = await greta.get("/api/v4/document/listino/P0001?source=catalog-1");
    expect(other.body).toMatchObject({
      code: "RECORD_NOT_FOUND",
      details: { dimension: "PROD", id: "P0001" },
    });
    const onTheFly = await anna.post("/api/v4/document?source=anag-1", { dim: "CUST", val_key: 999999 });
    expect(onTheFly.status).toBe(404);
    expect(onTheFly.body).toEqual({
      error: "NotFound",
      code: "RECORD_NOT_FOUND",
      status: 404,
      message: "CUST 999999 does not exist.",
      details: { dimension: "CUST", id: 999999 },
    });
    // The same shape as the history's and a command's answer for the record.
    const history = await anna.get("/api/v4/core/CUST/999999/history?source=anag-1");
    const command = await anna.post("/api/v4/core/CUST/command/process?source=anag-1", { id: 999999 });
    for (const res of [history, command]) {
      expect(res.status).toBe(404);
      expect(Object.keys(res.body).sort()).toEqual(Object.keys(onTheFly.body).sort());
      expect(res.body).toMatchObject({
        error: "NotFound",
        code: "RECORD_NOT_FOUND",
        message: onTheFly.body.message,
        details: { dimension: "CUST" },
      });
    }
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

  it("a missing member is 400 MISSING_PARAMETER naming it; a wrong one INVALID_FIELD saying what it takes", async () => {
    const post = (body: unknown) => anna.post("/api/v4/document?source=anag-1", body);
    const noKey = await post({ dim: "CUST" });
    expect(noKey.status).toBe(400);
    expect(noKey.body).toEqual({
      error: "ValidationError",
      code: "MISSING_PARAMETER",
      status: 400,
      field: "val_key",
      message:
        "The body must carry val_key (the root record's id, a string of 1 to 100 characters or a number).",
    });
    const noDim = await post({ val_key: 1 });
    expect(noDim.body).toMatchObject({ code: "MISSING_PARAMETER", status: 400, field: "dim" });
    expect(noDim.body.message).toContain("dim (the root dimension's code");
    const neither = await post({ compact: true });
    expect(neither.body).toMatchObject({ code: "MISSING_PARAMETER", field: "dim" });
    expect(neither.body.message).toMatch(/^The body must carry dim \(.*\) and val_key \(.*\)\.$/);

    const wrong: Array<[unknown, string, string]> = [
      [
        { dim: 7, val_key: 1 },
        "dim",
        "dim must be the root dimension's code, a string of 1 to 30 characters; got 7.",
      ],
      [
        { dim: "", val_key: 1 },
        "dim",
        'dim must be the root dimension\'s code, a string of 1 to 30 characters; got "".',
      ],
      [
        { dim: "CUST", val_key: null },
        "val_key",
        "val_key must be the root record's id, a string of 1 to 100 characters or a number; got null.",
      ],
      [
        { dim: "CUST", val_key: { id: 1 } },
        "val_key",
        'val_key must be the root record\'s id, a string of 1 to 100 characters or a number; got {"id":1}.',
      ],
      [{ dim: "CUST", val_key: 1, compact: "yes" }, "compact", 'compact must be true or false; got "yes".'],
      [
        { dim: "CUST", val_key: 1, related_dim: ["ADDR"] },
        "related_dim",
        'related_dim must be an object mapping each related dimension\'s code (up to 30 characters) to an array of at most 200 of its field codes (up to 60 characters each; [] for every field you may read in detail), e.g. {"ADDR": ["STREET"]}; got ["ADDR"].',
      ],
    ];
    for (const [body, field, message] of wrong) {
      const res = await post(body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body, JSON.stringify(body)).toEqual({
        error: "ValidationError",
        code: "INVALID_FIELD",
        status: 400,
        field,
        message,
      });
    }
    const fields = await post({ dim: "CUST", val_key: 1, related_dim: { ADDR: "STREET" } });
    expect(fields.body).toMatchObject({ code: "INVALID_FIELD", field: "related_dim.ADDR" });
    expect(fields.body.message).toMatch(/^related_dim\.ADDR must be an object mapping .*; got "STREET"\.$/);
    const extra = await post({ dim: "CUST", val_key: 1, source: "anag-1" });
    expect(extra.body).toMatchObject({
      code: "INVALID_FIELD",
      field: "source",
      message:
        "source is not a member of a document request, which takes dim, val_key, related_dim and compact (give source in the query string).",
    });
    for (const body of [[1], 42, null]) {
      const res = await post(body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body).toMatchObject({ code: "INVALID_REQUEST", status: 400 });
      expect(res.body.message).toBe(
        "The request body must be a JSON object: {dim, val_key, related_dim?, compact?}.",
      );
    }
    // None of these messages is zod's "Invalid input".
    expect(JSON.stringify([noKey.body, noDim.body, fields.body])).not.toContain("Invalid input");
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
    // A params member the document does not define is refused as the REST query parameter is.
    const undefinedParam = await gql(
      `{ document(source: "catalog-1", name: "listino", key: "P0001", params: {codLst: "WHS", foo: "1"}) }`,
    );
    expect(undefinedParam.body.errors[0].extensions).toMatchObject({
      code: "INVALID_PARAMETER",
      status: 400,
      field: "foo",
    });

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
