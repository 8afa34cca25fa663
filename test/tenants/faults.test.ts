// Fault isolation with databases per tenant (issue 36 §2, decisions.md §18): the profile's
// PostgreSQL is reached through a TCP proxy the test cuts. While it is cut, the profile's tenant
// gets 503 DATABASE_UNAVAILABLE at once and the other tenants are served as before; /healthz shows
// the profile down, /readyz stays ready (the main's only); once the proxy is back, the tenant is
// served again without anything done. A profile unreachable at start does not stop the start: its
// tenants get 503 naming it until it answers, then it is readied (migrations, tables) alone.
import type { AddressInfo } from "node:net";
import { createClient, type ExecutionResult } from "graphql-ws";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { buildApp } from "../../src/app.ts";
import { loadConfig } from "../../src/config.ts";
import { openPostgres } from "../../src/db/database.ts";
import { createLogger } from "../../src/logger.ts";
import { openServices } from "../../src/services.ts";
import { bearer, loginAs, UNLIMITED_ENV } from "../helpers/auth.ts";
import { createTestApp, TEST_DATABASE_URL, TEST_JWT_SECRET, type TestApp } from "../helpers/env.ts";
import { faultyProxy, throughProxy } from "../helpers/proxy.ts";
import { eventually } from "../events/support.ts";
import { createProfileDatabase, type ProfileDatabase, sampleWithGlobexOn } from "./helpers.ts";

if (TEST_DATABASE_URL)
  describe("a profile's database unreachable (postgres, TCP proxy)", () => {
    let eu: ProfileDatabase;
    let proxy: Awaited<ReturnType<typeof faultyProxy>>;
    let t: TestApp;
    let greta: string;
    let anna: string;
    beforeAll(async () => {
      eu = await createProfileDatabase();
      const target = new URL(eu.url);
      proxy = await faultyProxy(target.hostname, Number(target.port || 5432));
      t = await createTestApp("postgres", {
        fixture: await sampleWithGlobexOn("EU"),
        env: {
          ...UNLIMITED_ENV,
          DATABASE_URL_EU: throughProxy(eu.url, proxy),
          DATABASE_CONNECT_TIMEOUT_MS: "1000",
        },
      });
      [greta, anna] = await Promise.all([
        loginAs(t.app, "greta", "greta-secret-4"),
        loginAs(t.app, "anna", "anna-secret-1"),
      ]);
    });
    afterAll(async () => {
      await t?.close();
      await proxy?.close();
      await eu?.drop();
    });

    const cities = (token: string) =>
      t.app.inject({ method: "GET", url: "/api/v4/core/CITY?source=anag-3", headers: bearer(token) });

    it("answers the profile's tenant 503 DATABASE_UNAVAILABLE fast, the others as before, and recovers alone", async () => {
      expect((await cities(greta)).statusCode).toBe(200);
      proxy.cut();
      try {
        const started = performance.now();
        const refused = await cities(greta);
        const ms = performance.now() - started;
        expect(refused.statusCode, refused.body).toBe(503);
        // The tenant's own database, named as at start-up: the other tenants are served.
        expect(refused.json()).toMatchObject({
          code: "DATABASE_UNAVAILABLE",
          status: 503,
          message: "The tenant's database (profile EU) is not reachable right now; retry shortly.",
          details: { profile: "EU" },
        });
        expect(refused.headers["retry-after"]).toBeDefined();
        expect(ms).toBeLessThan(1500);
        // The other tenant, on the main database, is served all along, while the cut profile's
        // tenant keeps asking: none of its answers waits for the profile (a request that did
        // would take DATABASE_CONNECT_TIMEOUT_MS, 1 s here).
        const timed = async (token: string) => {
          const started = performance.now();
          const res = await cities(token);
          return {
            status: res.statusCode,
            rows: res.statusCode === 200 ? res.json().data.length : 0,
            ms: performance.now() - started,
          };
        };
        const [others, cutOnes] = await Promise.all([
          (async () => {
            const out = [];
            for (let i = 0; i < 20; i++) out.push(await timed(anna));
            return out;
          })(),
          (async () => {
            const out = [];
            for (let i = 0; i < 20; i++) out.push(await timed(greta));
            return out;
          })(),
        ]);
        expect(others.map((r) => [r.status, r.rows])).toEqual(others.map(() => [200, 4]));
        expect(cutOnes.map((r) => r.status)).toEqual(cutOnes.map(() => 503));
        expect(Math.max(...others.map((r) => r.ms))).toBeLessThan(500);
        expect(Math.max(...cutOnes.map((r) => r.ms))).toBeLessThan(500);
        const write = await t.app.inject({
          method: "POST",
          url: "/api/v4/core/CITY?source=anag-3",
          headers: bearer(greta),
          payload: { data: { CITY_ID: "CUT-1", NAME: "x", COUNTRY: "CH" } },
        });
        expect(write.statusCode).toBe(503);
        // Webhook registrations are read through Prisma on the profile's pool: named the same way.
        const hooks = await t.app.inject({ method: "GET", url: "/api/v4/webhooks", headers: bearer(greta) });
        expect(hooks.statusCode, hooks.body).toBe(503);
        expect(hooks.json()).toMatchObject({ code: "DATABASE_UNAVAILABLE", details: { profile: "EU" } });
        const health = await t.app.inject({ method: "GET", url: "/healthz" });
        expect(health.json().dependencies).toMatchObject({ database: "up", database_eu: "down" });
        expect((await t.app.inject({ method: "GET", url: "/readyz" })).statusCode).toBe(200);
      } finally {
        proxy.restore();
      }
      const back = await eventually(async () => {
        const res = await cities(greta);
        return res.statusCode === 200 ? res : undefined;
      });
      expect(back.json().data).toHaveLength(4);
      const health = await t.app.inject({ method: "GET", url: "/healthz" });
      expect(health.json().dependencies).toMatchObject({ database: "up", database_eu: "up" });
    });

    it("refuses a WebSocket operation of the profile's tenant with 503 while it is cut; the socket and others go on", async () => {
      await t.app.listen({ host: "127.0.0.1", port: 0 });
      const url = `ws://127.0.0.1:${(t.app.server.address() as AddressInfo).port}/graphql`;
      const run = async (client: ReturnType<typeof createClient>, query: string) =>
        new Promise<{ results: ExecutionResult[]; error: unknown }>((resolve) => {
          const results: ExecutionResult[] = [];
          client.subscribe(
            { query },
            {
              next: (r) => results.push(r as ExecutionResult),
              error: (error) => resolve({ results, error }),
              complete: () => resolve({ results, error: null }),
            },
          );
        });
      const socket = (token: string) =>
        createClient({
          url,
          webSocketImpl: WebSocket,
          retryAttempts: 0,
          connectionParams: { authorization: `Bearer ${token}` },
        });
      const gretaWs = socket(greta);
      const annaWs = socket(anna);
      const query = `{ CITY(source: "anag-3") { data { CITY_ID } } }`;
      try {
        expect((await run(gretaWs, query)).results[0]?.errors).toBeUndefined();
        proxy.cut();
        try {
          const refused = await run(gretaWs, query);
          expect(refused.results[0]?.errors?.[0]?.extensions).toMatchObject({
            code: "DATABASE_UNAVAILABLE",
            status: 503,
          });
          const other = await run(annaWs, query);
          expect(other.error).toBeNull();
          expect(other.results[0]?.data).toMatchObject({ CITY: { data: expect.any(Array) } });
          expect((other.results[0]!.data as { CITY: { data: unknown[] } }).CITY.data).toHaveLength(4);
        } finally {
          proxy.restore();
        }
        // The same socket serves the tenant again once its database answers.
        await eventually(async () => {
          const again = await run(gretaWs, query);
          return again.error === null && again.results[0]?.errors === undefined;
        });
      } finally {
        await gretaWs.dispose();
        await annaWs.dispose();
      }
    });

    it("starts with a profile unreachable: 503 naming it for its tenants, readied once it answers", async () => {
      // A second process on the same main database, started while the profile is cut.
      const main = openPostgres((t.services.db as { connectionString: string }).connectionString, { max: 4 });
      const config = loadConfig({
        ...UNLIMITED_ENV,
        LOG_LEVEL: "silent",
        JWT_SECRET: TEST_JWT_SECRET,
        DEMO_DATA: "false",
        DATABASE_URL_EU: throughProxy(eu.url, proxy),
        DATABASE_CONNECT_TIMEOUT_MS: "1000",
      });
      proxy.cut();
      let restored = false;
      const services = await openServices(config, { db: main, logger: createLogger("silent") });
      try {
        expect(services.profiles.state("EU")).toBe("pending");
        const app = await buildApp(services);
        try {
          const token = await loginAs(app, "greta", "greta-secret-4");
          const refused = await app.inject({
            method: "GET",
            url: "/api/v4/core/CITY?source=anag-3",
            headers: bearer(token),
          });
          expect(refused.statusCode, refused.body).toBe(503);
          expect(refused.json()).toMatchObject({
            code: "DATABASE_UNAVAILABLE",
            message: "The tenant's database (profile EU) is not reachable right now; retry shortly.",
            details: { profile: "EU" },
          });
          // Over WebSocket the operation is refused (the socket stays), naming the profile.
          await app.listen({ host: "127.0.0.1", port: 0 });
          const ws = createClient({
            url: `ws://127.0.0.1:${(app.server.address() as AddressInfo).port}/graphql`,
            webSocketImpl: WebSocket,
            retryAttempts: 0,
            connectionParams: { authorization: `Bearer ${token}` },
          });
          try {
            const error = await new Promise<unknown>((resolve) => {
              ws.subscribe(
                { query: `{ CITY(source: "anag-3") { data { CITY_ID } } }` },
                { next: () => {}, error: resolve, complete: () => resolve(null) },
              );
            });
            expect(error).toEqual([
              expect.objectContaining({
                message: "The tenant's database (profile EU) is not reachable right now; retry shortly.",
                extensions: expect.objectContaining({ code: "DATABASE_UNAVAILABLE", status: 503 }),
              }),
            ]);
          } finally {
            await ws.dispose();
          }
          const other = await loginAs(app, "anna", "anna-secret-1");
          expect(
            (
              await app.inject({
                method: "GET",
                url: "/api/v4/core/CITY?source=anag-3",
                headers: bearer(other),
              })
            ).statusCode,
          ).toBe(200);
          // A metadata change must reach every database: refused as a whole, naming the profile.
          const change = await app.inject({
            method: "POST",
            url: "/api/v4/core/VAR?source=erp",
            headers: bearer(other),
            payload: { data: { COD_DIM: "CITY", NUM_VAR: 41, COD_VAR: "AREA", DATA_TYPE: "INTEGER" } },
          });
          expect(change.statusCode, change.body).toBe(503);
          expect(change.json().message).toContain("profile EU is not reachable");
          const column = await main.query(
            `SELECT 1 FROM information_schema.columns WHERE table_name = 'TB_ANAG_CITY00' AND column_name = 'AREA'`,
          );
          expect(column.rows).toEqual([]);

          proxy.restore();
          restored = true;
          const back = await eventually(async () => {
            const res = await app.inject({
              method: "GET",
              url: "/api/v4/core/CITY?source=anag-3",
              headers: bearer(token),
            });
            return res.statusCode === 200 ? res : undefined;
          });
          expect(back.json().data.length).toBeGreaterThanOrEqual(4);
          expect(services.profiles.state("EU")).toBe("ready");
        } finally {
          await app.close();
        }
      } finally {
        if (!restored) proxy.restore();
        await services.close();
      }
    });
  });
