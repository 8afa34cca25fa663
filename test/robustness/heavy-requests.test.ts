// Heavy requests take turns per tenant (issue 18 §3, src/http/heavy-requests.ts): a tenant's
// requests estimated at HEAVY_REQUEST_VALUES or more run TENANT_HEAVY_REQUESTS at a time in a
// process, the next TENANT_HEAVY_WAITING wait in order, any more are refused with 429 and
// Retry-After; another tenant's heavy requests and everyone's cheap requests never wait behind
// them. On PostgreSQL, where a statement can be held by a table lock the test takes: tenant A's
// first heavy list blocks in the database, so what its lane does meanwhile is seen.
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../events/support.ts";
import { heavyGauge } from "./support.ts";
import { bearer, loginAs, SAMPLE_USERS, UNLIMITED_ENV } from "../helpers/auth.ts";
import { createTestApp, TEST_DATABASE_URL, type TestApp } from "../helpers/env.ts";

if (TEST_DATABASE_URL)
  describe("heavy requests take turns per tenant (PostgreSQL)", () => {
    let t: TestApp;
    let lock: pg.Client;
    const tokens: Record<string, string> = {};

    beforeAll(async () => {
      t = await createTestApp("postgres", {
        fixture: "sample",
        env: {
          ...UNLIMITED_ENV,
          // Any page of more than a few values is heavy here, so the sample's lists are.
          HEAVY_REQUEST_VALUES: "20",
          TENANT_HEAVY_REQUESTS: "1",
          TENANT_HEAVY_WAITING: "1",
        },
      });
      tokens.anna = await loginAs(t.app, SAMPLE_USERS.anna.username, SAMPLE_USERS.anna.password);
      tokens.greta = await loginAs(t.app, SAMPLE_USERS.greta.username, SAMPLE_USERS.greta.password);
      if (t.services.db.kind !== "postgres") throw new Error("PostgreSQL expected");
      lock = new pg.Client({ connectionString: t.services.db.connectionString });
      await lock.connect();
    }, 60_000);

    afterAll(async () => {
      await lock?.end();
      await t?.close();
    });

    const get = (who: string, url: string) =>
      t.app.inject({ method: "GET", url, headers: bearer(tokens[who]!) });
    const graphql = (who: string, query: string) =>
      t.app.inject({
        method: "POST",
        url: "/graphql",
        headers: { ...bearer(tokens[who]!), "content-type": "application/json" },
        payload: { query },
      });
    const HEAVY_CUSTOMERS = "/api/v4/core/CUST?source=anag-1&$num_rows=100";

    it("queues a tenant's second heavy request, refuses the third, and keeps others answering", async () => {
      await lock.query("BEGIN");
      await lock.query('LOCK TABLE "TB_ANAG_CUST00" IN ACCESS EXCLUSIVE MODE');
      // Tenant A's first heavy request holds its lane, blocked in the database.
      const first = get("anna", HEAVY_CUSTOMERS);
      await eventually(async () => (await heavyGauge(t, "running")) === 1, {
        what: "A's first heavy request",
      });
      // Its second waits in the lane (the database never sees it).
      const second = get("anna", `${HEAVY_CUSTOMERS}&$order=NAME`);
      await eventually(async () => (await heavyGauge(t, "waiting")) === 1, { what: "A's second waiting" });

      // The third is refused at once, over REST as over GraphQL, with when to retry.
      const refused = await get("anna", HEAVY_CUSTOMERS);
      expect(refused.statusCode).toBe(429);
      expect(refused.headers["retry-after"]).toBe("1");
      expect(refused.json()).toMatchObject({ code: "RATE_LIMIT_EXCEEDED", status: 429 });
      const refusedGraphql = await graphql(
        "anna",
        '{ PROD(source: "catalog-1", limit: 100) { data { PROD_ID } } }',
      );
      expect(refusedGraphql.json()).toMatchObject({
        errors: [{ extensions: { code: "RATE_LIMIT_EXCEEDED", status: 429 } }],
      });

      // Through yoga's own path too (a GET, which the fast path leaves to yoga).
      const heavyQuery = '{ PROD(source: "catalog-1", limit: 100) { data { PROD_ID } } }';
      const refusedGet = await t.app.inject({
        method: "GET",
        url: `/graphql?query=${encodeURIComponent(heavyQuery)}`,
        headers: { ...bearer(tokens.anna!), accept: "application/json" },
      });
      expect(refusedGet.json()).toMatchObject({
        errors: [{ extensions: { code: "RATE_LIMIT_EXCEEDED", status: 429 } }],
      });
      expect(await heavyGauge(t, "waiting")).toBe(1);

      // Meanwhile: A's cheap requests, and B's heavy ones (GraphQL and REST), answer at once.
      const cheap = await get("anna", "/api/v4/core/CITY?source=anag-3&$num_rows=1");
      expect(cheap.statusCode).toBe(200);
      const theirs = await get("greta", "/api/v4/core/PROD?source=catalog-1&$num_rows=100");
      expect(theirs.statusCode).toBe(200);
      const theirsGraphql = await graphql(
        "greta",
        '{ PROD(source: "catalog-1", limit: 100) { data { PROD_ID } } }',
      );
      expect(theirsGraphql.json().errors).toBeUndefined();
      expect(await heavyGauge(t, "running")).toBe(1);

      // The lock goes: A's two answer, in turn, and the lane empties.
      await lock.query("ROLLBACK");
      expect((await first).statusCode).toBe(200);
      expect((await second).statusCode).toBe(200);
      expect((await second).json().data.length).toBeGreaterThan(0);
      await eventually(
        async () => (await heavyGauge(t, "running")) === 0 && (await heavyGauge(t, "waiting")) === 0,
        { what: "the lane to empty" },
      );
    }, 60_000);
  });
