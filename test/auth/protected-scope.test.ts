// The protected scope (src/http/protected.ts): one preHandler authenticates every route inside it;
// login, refresh and health checks are outside; GraphiQL's page opts out for browsers only.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestApp, type TestApp } from "../helpers/env.ts";

describe("the protected scope", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp("pglite", { fixture: "sample" });
  });
  afterAll(async () => {
    await t?.close();
  });

  it("refuses every protected route without a token, before its handler runs", async () => {
    const calls: Array<[string, string, unknown?]> = [
      ["GET", "/api/v4/core/CUST?source=anag-1"],
      ["GET", "/api/v4/core/CUST/1?source=anag-1"],
      ["GET", "/api/v4/core/CUST/count?source=anag-1"],
      ["GET", "/api/v4/core/DIM?source=erp"],
      ["GET", "/api/v4/core/VAR?source=erp&filter[COD_DIM]=CUST"],
      ["POST", "/api/v4/core/CUST?source=anag-1", { data: { NAME: "x" } }],
      ["PATCH", "/api/v4/core/CUST/1?source=anag-1", { data: { NAME: "x" } }],
      ["DELETE", "/api/v4/core/CUST/1?source=anag-1"],
      ["POST", "/api/v4/core/batch", { operations: [] }],
      ["POST", "/api/v4/core/VAR?source=erp", { data: {} }],
    ];
    for (const [method, url, payload] of calls) {
      const res = await t.app.inject({
        method: method as "GET",
        url,
        ...(payload === undefined ? {} : { payload: payload as object }),
      });
      expect(res.statusCode, `${method} ${url}`).toBe(401);
      expect(res.json(), `${method} ${url}`).toMatchObject({ code: "TOKEN_MISSING", status: 401 });
    }
    const count = await t.services.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM "TB_ANAG_CUST00"`);
    expect(count.rows[0]!.n).toBe(5);
  });

  it("GraphQL answers 401 in its own error shape; GraphiQL's page needs no token", async () => {
    const gql = await t.app.inject({ method: "POST", url: "/graphql", payload: { query: "{ __typename }" } });
    expect(gql.statusCode).toBe(401);
    expect(gql.json()).toEqual({
      errors: [{ message: expect.any(String), extensions: { code: "TOKEN_MISSING", status: 401 } }],
    });
    const getJson = await t.app.inject({ method: "GET", url: "/graphql?query=%7B__typename%7D" });
    expect(getJson.statusCode).toBe(401);
    const page = await t.app.inject({ method: "GET", url: "/graphql", headers: { accept: "text/html" } });
    expect(page.statusCode).toBe(200);
    expect(page.headers["content-type"]).toContain("text/html");
  });

  it("login and health checks are public", async () => {
    expect((await t.app.inject({ method: "GET", url: "/healthz" })).statusCode).toBe(200);
    const login = await t.app.inject({
      method: "POST",
      url: "/auth/login",
      payload: { username: "anna", password: "anna-secret-1" },
    });
    expect(login.statusCode).toBe(200);
  });
});
