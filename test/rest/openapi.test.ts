// OpenAPI (decisions.md §16, issue 13): /api/v4/openapi.json generated from the metadata for the
// caller, validated by an independent OpenAPI 3.1 validator; a caller's document leaves out the
// dimensions and fields the caller cannot read; the browsable page and its assets are served from
// the project's own files, without a token.
import { compileErrors, validate } from "@readme/openapi-parser";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, loginAs, SAMPLE_USERS } from "../helpers/auth.ts";
import { createTestApp, type TestApp } from "../helpers/env.ts";
import { type Client, clientFor, NO_RATE_LIMITS } from "../write/http.ts";

describe("OpenAPI of the sample fixture", () => {
  let t: TestApp;
  let anna: Client;
  let lucia: Client;
  beforeAll(async () => {
    t = await createTestApp("pglite", { fixture: "sample", env: NO_RATE_LIMITS });
    [anna, lucia] = await Promise.all([clientFor(t.app, "anna"), clientFor(t.app, "lucia")]);
  });
  afterAll(async () => {
    await t?.close();
  });

  it("is a valid OpenAPI 3.1 document with list, detail, create and update schemas per dimension", async () => {
    const res = await anna.get("/api/v4/openapi.json");
    expect(res.status).toBe(200);
    const doc = res.body;
    expect(doc.openapi).toBe("3.1.0");
    const result = await validate(structuredClone(doc));
    expect(result.valid, result.valid ? "" : compileErrors(result)).toBe(true);
    for (const dim of ["CITY", "CUST", "ADDR", "PROD", "LST", "PRICE", "ORD", "ORDL"]) {
      expect(doc.paths[`/api/v4/core/${dim}`], dim).toBeDefined();
      expect(doc.paths[`/api/v4/core/${dim}/{id}`].patch.requestBody).toBeDefined();
      for (const suffix of ["", "_list_item", "_create", "_update"]) {
        expect(doc.components.schemas[`${dim}${suffix}`], `${dim}${suffix}`).toBeDefined();
      }
    }
    const cust = doc.components.schemas.CUST.properties;
    expect(cust.CREDIT_LIMIT.type).toEqual(["number", "null"]);
    expect(cust.CUST_ID.type).toEqual(["integer", "null"]);
    expect(doc.components.schemas.CUST_create.properties).not.toHaveProperty("CUST_ID");
    expect(doc.paths["/api/v4/core/CUST"].get.responses["400"].content["application/json"].schema).toEqual({
      $ref: "#/components/schemas/Error",
    });
  });

  it("a caller's document leaves out what the caller cannot read", async () => {
    const doc = (await lucia.get("/api/v4/openapi.json")).body;
    expect((await validate(structuredClone(doc))).valid).toBe(true);
    // lucia reads customers (anag-1) and orders (sales-1) only, at peso 3.
    const dims = Object.keys(doc.paths)
      .map((p) => p.split("/")[4])
      .filter((d, i, all) => all.indexOf(d) === i)
      .sort();
    expect(dims).toEqual(["CUST", "ORD"]);
    const cust = doc.components.schemas.CUST.properties;
    expect(cust).toHaveProperty("NAME");
    expect(cust).not.toHaveProperty("CREDIT_LIMIT");
    expect(cust).not.toHaveProperty("RISK_SCORE");
    expect(cust).not.toHaveProperty("INTERNAL");
    expect(doc.components.schemas).not.toHaveProperty("PROD");
    expect((await t.app.inject({ method: "GET", url: "/api/v4/openapi.json" })).statusCode).toBe(401);
  });

  it("the browsable page and its assets are served locally, without a token", async () => {
    const page = await t.app.inject({ method: "GET", url: "/api/v4/docs" });
    expect(page.statusCode).toBe(200);
    expect(page.headers["content-type"]).toMatch(/text\/html/);
    expect(page.body).toContain("/api/v4/docs/assets/swagger-ui-bundle.js");
    expect(page.body).not.toMatch(/https?:\/\/(cdn|unpkg|jsdelivr)/);
    const js = await t.app.inject({ method: "GET", url: "/api/v4/docs/assets/swagger-ui-bundle.js" });
    expect(js.statusCode).toBe(200);
    expect(js.headers["content-type"]).toMatch(/javascript/);
    expect(Number(js.headers["content-length"] ?? js.body.length)).toBeGreaterThan(100_000);
    const css = await t.app.inject({ method: "GET", url: "/api/v4/docs/assets/swagger-ui.css" });
    expect(css.statusCode).toBe(200);
    const outside = await t.app.inject({ method: "GET", url: "/api/v4/docs/assets/package.json" });
    expect(outside.statusCode).toBe(404);
  });
});

describe("OpenAPI servers", () => {
  it("without PUBLIC_URL the server is relative ('/'), whatever Host the request names", async () => {
    const t = await createTestApp("pglite", { fixture: "sample", env: NO_RATE_LIMITS });
    try {
      const token = await loginAs(t.app, SAMPLE_USERS.anna.username, SAMPLE_USERS.anna.password);
      const res = await t.app.inject({
        method: "GET",
        url: "/api/v4/openapi.json",
        headers: { ...bearer(token), host: "attacker.example", "x-forwarded-host": "attacker.example" },
      });
      expect(res.statusCode).toBe(200);
      expect(res.json().servers).toEqual([{ url: "/" }]);
      expect(res.body).not.toContain("attacker.example");
    } finally {
      await t.close();
    }
  });

  it("with PUBLIC_URL the server is that URL (no trailing slash)", async () => {
    const t = await createTestApp("pglite", {
      fixture: "sample",
      env: { ...NO_RATE_LIMITS, PUBLIC_URL: "https://api.example.com/dimensio/" },
    });
    try {
      const anna = await clientFor(t.app, "anna");
      const doc = (await anna.get("/api/v4/openapi.json")).body;
      expect(doc.servers).toEqual([{ url: "https://api.example.com/dimensio" }]);
      expect((await validate(structuredClone(doc))).valid).toBe(true);
    } finally {
      await t.close();
    }
  });
});
