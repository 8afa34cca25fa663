// "Bad input never gives a 500": random methods, paths, query strings and JSON bodies against the
// whole app, as an admin, as a read-only user and without a token. Every answer must be < 500 and,
// when it is an error, the standard error body.
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, loginAs, UNLIMITED_ENV } from "../helpers/auth.ts";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";

const PATHS = [
  "/api/v4/core/CUST",
  "/api/v4/core/CUST/1",
  "/api/v4/core/CUST/count",
  "/api/v4/core/CUST/fields",
  "/api/v4/core/CUST/sort/by_name",
  "/api/v4/core/ORD",
  "/api/v4/core/ORD/1",
  "/api/v4/core/CITY/MI",
  "/api/v4/core/PROD/P0001",
  "/api/v4/core/CUST/batch",
  "/api/v4/core/CUST/batch-delete",
  "/api/v4/core/batch",
  "/api/v4/core/DIM/CUST",
  "/api/v4/core/VAR",
  "/api/v4/core/COST/CUST/3",
  "/api/v4/core/MENU/erp",
  "/api/v4/core/NOPE",
  "/api/v4/core/CUST/%27%3B--",
  "/auth/login",
  "/auth/refresh",
  "/auth/logout",
  "/api/v4/auth/login",
  "/api/v4/auth/tokenvalidator",
  "/api/v4/core/vars",
  "/api/v4/webhooks",
  "/api/v4/webhooks/1",
  "/api/v4/webhooks/1/deliveries",
  "/api/v4/analytics/events",
  "/api/v4/document/listino/P0001",
  "/api/v4/document",
  "/api/v4/core/CUST/command/process",
  "/api/v4/core/CUST/1/history",
  "/api/v4/core/CITY/MI/history",
  "/api/v4/core/CUST/1/history/1/restore",
  "/api/v4/core/CUST/1/history/x/restore",
  "/api/v4/core/CITY/%27%3B--/history/99999999999/restore",
  "/api/v4/core/CITY/command/nope",
  "/api/v4/media/upload",
  "/api/v4/core/PROD/media",
  "/api/v4/media/PROD/P0001/IMAGE",
  "/api/v4/media/public/PROD/P0001/IMAGE",
  "/api/v4/core/PROD/P0001/media/IMAGE",
  "/api/v4/openapi.json",
  "/metrics",
];
const PARAMS = [
  "source",
  "$filter",
  "filter[NAME]",
  "filter[CUST_ID][$in]",
  "filter[CDATA][$between]",
  "sort",
  "$order",
  "$num_rows",
  "$offset",
  "$expand",
  "$fields",
  "force",
  "cond_trec",
  "aggregate",
  "$group",
  "center_dett",
  "debug",
  "forceListCost",
  "$search",
  "$count",
  "field",
  "getACList",
  "size",
  "tenant",
  "codLst",
  "from",
  "compact",
];
const VALUES = [
  "anag-1",
  "erp",
  "sales-1",
  "price-1",
  "1",
  "-1",
  "true",
  "CITY",
  "ADDR",
  "NAME",
  "COUNT(NAME)",
  "C,N",
  "CITY_ID",
  "thumbnail",
  "acme",
  "2026-02-30",
];
const FIELDS = [
  "NAME",
  "CUST_ID",
  "CITY_ID",
  "TREC",
  "CREDIT_LIMIT",
  "VIP",
  "CODE",
  "ORDL",
  "EMAIL",
  "CDATA",
  "X",
  "url",
  "events",
  "id",
  "dim",
  "val_key",
  "related_dim",
  "data",
];

const json = fc.jsonValue({ maxDepth: 3 });
const request = fc.record({
  method: fc.constantFrom("GET", "POST", "PUT", "PATCH", "DELETE"),
  path: fc.constantFrom(...PATHS),
  query: fc.dictionary(fc.constantFrom(...PARAMS), fc.oneof(fc.string(), fc.constantFrom(...VALUES))),
  body: fc.oneof(
    json,
    fc.record({ data: json }),
    fc.record({ data: fc.dictionary(fc.constantFrom(...FIELDS), json) }),
    fc.record({ data: fc.array(fc.dictionary(fc.constantFrom(...FIELDS), json), { maxLength: 3 }) }),
    fc.record({ ids: json, force: json }),
    fc.record({ operations: json }),
  ),
  caller: fc.constantFrom("anna", "lucia", "anonymous"),
});

describe.each(BACKENDS)("no input gives a 500 (%s)", (backend) => {
  let t: TestApp;
  const tokens: Record<string, string> = {};
  beforeAll(async () => {
    t = await createTestApp(backend, { fixture: "sample", env: UNLIMITED_ENV });
    tokens.anna = await loginAs(t.app, "anna", "anna-secret-1");
    tokens.lucia = await loginAs(t.app, "lucia", "lucia-secret-3");
  });
  afterAll(async () => {
    await t?.close();
  });

  it("random requests are answered below 500, errors in the standard body", async () => {
    await fc.assert(
      fc.asyncProperty(request, async (r) => {
        const query = new URLSearchParams(r.query as Record<string, string>).toString();
        const token = tokens[r.caller];
        const res = await t.app.inject({
          method: r.method as "GET",
          url: `${r.path}?${query}`,
          headers: token ? bearer(token) : {},
          ...(r.method === "GET"
            ? {}
            : {
                payload: JSON.stringify(r.body),
                headers: { ...(token ? bearer(token) : {}), "content-type": "application/json" },
              }),
        });
        expect(
          res.statusCode,
          `${r.method} ${r.path}?${query} ${JSON.stringify(r.body)}: ${res.body}`,
        ).toBeLessThan(500);
        if (res.statusCode >= 400 && !r.path.startsWith("/api/v4/auth/")) {
          expect(res.json()).toMatchObject({ code: expect.any(String), status: res.statusCode });
        }
      }),
      { numRuns: backend === "pglite" ? 600 : 300 },
    );
  });
});
