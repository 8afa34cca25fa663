// A document's query parameters (explore restops finding 7): a value the part's field cannot take
// is 400 INVALID_PARAMETER naming the parameter the client sent, never the part's field the
// definition maps it to; an empty value is refused, not read as "no filter".
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { graphqlClient } from "../graphql/helpers.ts";
import { loginAs, SAMPLE_USERS } from "../helpers/auth.ts";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";
import { type Client, clientFor, NO_RATE_LIMITS } from "../write/http.ts";

describe.each(BACKENDS)("document parameters (%s)", (backend) => {
  let t: TestApp;
  let anna: Client;

  beforeAll(async () => {
    t = await createTestApp(backend, { fixture: "sample", env: NO_RATE_LIMITS });
    anna = await clientFor(t.app, "anna");
    // A document whose parameter filters a DECIMAL field of its part.
    const created = await anna.post("/api/v4/core/DOCUMENT?source=erp", {
      data: {
        DOC_NAME: "prices_at",
        COD_DIM: "PROD",
        DEFINITION: {
          fields: ["PROD_ID"],
          parts: [
            {
              name: "prices",
              dim: "PRICE",
              join: { PROD_ID: "PROD_ID" },
              fields: ["COD_LST", "PRICE"],
              params: { price: "PRICE", lst: "COD_LST" },
            },
          ],
        },
      },
    });
    expect(created.status).toBe(201);
  });
  afterAll(async () => {
    await t?.close();
  });

  const refusal = (field: string, message: string) => ({
    error: "BadRequest",
    code: "INVALID_PARAMETER",
    status: 400,
    field,
    message,
  });

  it("a value the part's field cannot take names the parameter sent, not the field", async () => {
    const bad = await anna.get("/api/v4/document/prices_at/P0001?source=catalog-1&price=abc");
    expect(bad.status).toBe(400);
    expect(bad.body).toEqual(refusal("price", "price: expected a number, got 'abc'."));
    const good = await anna.get("/api/v4/document/prices_at/P0001?source=catalog-1&price=0.09");
    expect(good.status).toBe(200);
    expect(good.body.data.prices).toEqual([{ COD_LST: "WHS", PRICE: 0.09 }]);
  });

  it("an empty value is 400, not read as no filter; a parameter left out filters nothing", async () => {
    for (const [url, param] of [
      ["/api/v4/document/listino/P0001?source=catalog-1&codLst=", "codLst"],
      ["/api/v4/document/prices_at/P0001?source=catalog-1&lst=WHS&price=", "price"],
    ] as const) {
      const res = await anna.get(url);
      expect(res.status, url).toBe(400);
      expect(res.body, url).toEqual(
        refusal(
          param,
          `${param} is empty: give the value to filter on, or leave ${param} out for no filter.`,
        ),
      );
    }
    const all = await anna.get("/api/v4/document/listino/P0001?source=catalog-1");
    expect(all.body.data.prices).toHaveLength(2);
  });

  it("GraphQL's document params are checked the same way", async () => {
    const gql = graphqlClient(
      t.app,
      await loginAs(t.app, SAMPLE_USERS.anna.username, SAMPLE_USERS.anna.password),
    );
    const bad = await gql(
      `{ document(source: "catalog-1", name: "prices_at", key: "P0001", params: {price: "abc"}) }`,
    );
    expect(bad.body.errors[0].extensions).toMatchObject({
      code: "INVALID_PARAMETER",
      status: 400,
      field: "price",
    });
    const empty = await gql(
      `{ document(source: "catalog-1", name: "listino", key: "P0001", params: {codLst: ""}) }`,
    );
    expect(empty.body.errors[0].extensions).toMatchObject({
      code: "INVALID_PARAMETER",
      status: 400,
      field: "codLst",
    });
  });
});
