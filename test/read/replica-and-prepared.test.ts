// Reads on PostgreSQL: DATABASE_READ_URL sends reads to the replica handle, and read statements
// run as named prepared statements, namespaced by the metadata version.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildApp } from "../../src/app.ts";
import { loadConfig } from "../../src/config.ts";
import { openPostgres } from "../../src/db/database.ts";
import { createLogger } from "../../src/logger.ts";
import { emptyListQuery } from "../../src/query/types.ts";
import { createReadContext, listRecords } from "../../src/resolvers/read/index.ts";
import { openServices, type Services } from "../../src/services.ts";
import type { RequestContext } from "../../src/types.ts";
import { bearer, loginAs } from "../helpers/auth.ts";
import { BACKENDS, createTestServices, TEST_DATABASE_URL, TEST_JWT_SECRET } from "../helpers/env.ts";

const ctx = (tenantId: string): RequestContext => ({
  principal: {
    userId: "anna",
    tenantId,
    sessionId: "t",
    peso: 1,
    centroDett: null,
    ambiente: null,
    lingua: null,
    grants: [{ COD_MENU: "erp", NLEFT: 1, NRIGHT: 22, OPERATIONS: ["read"], LEVEL: 4 }],
  },
  source: "anag-1",
  centerDett: null,
  requestId: "t",
  now: () => new Date(),
});

describe.each(BACKENDS)("reads without DATABASE_READ_URL (%s)", (backend) => {
  it("go to the primary database, and prepared-statement options do not change results", async () => {
    const services = await createTestServices(backend, { fixture: "sample" });
    try {
      expect(services.readDb).toBe(services.db);
      const plain = await services.db.query(`SELECT "NAME" FROM "TB_ANAG_CUST00" ORDER BY "CUST_ID"`);
      const prepared = await services.db.query(`SELECT "NAME" FROM "TB_ANAG_CUST00" ORDER BY "CUST_ID"`, [], {
        prepare: 1,
      });
      expect(prepared.rows).toEqual(plain.rows);
      expect(plain.rows.length).toBe(5);
    } finally {
      await services.close();
    }
  });
});

if (TEST_DATABASE_URL) {
  describe("reads on PostgreSQL", () => {
    let seeded: Services;
    let url: string;
    beforeAll(async () => {
      seeded = await createTestServices("postgres", { fixture: "sample", databaseDirect: true });
      if (seeded.db.kind !== "postgres") throw new Error("expected PostgreSQL");
      url = seeded.db.connectionString;
    });
    afterAll(async () => {
      await seeded?.close();
    });

    it("read statements are prepared once per connection, named by metadata version", async () => {
      const one = openPostgres(url, { max: 1 });
      try {
        const rc = createReadContext({ db: one, metadata: seeded.metadata }, ctx("acme"));
        const first = await listRecords(rc, "CUST", emptyListQuery());
        const again = await listRecords(rc, "CUST", emptyListQuery());
        expect(again.data).toEqual(first.data);
        expect(first.data.length).toBe(4);
        const prepared = await one.query<{ name: string; statement: string }>(
          "SELECT name, statement FROM pg_prepared_statements",
        );
        const version = seeded.metadata.current().version;
        expect(prepared.rows.length).toBeGreaterThan(0);
        for (const p of prepared.rows) expect(p.name.startsWith(`d${version}_`)).toBe(true);
        expect(prepared.rows.some((p) => p.statement.includes('"TB_ANAG_CUST00"'))).toBe(true);
        // Each execution is planned with its parameters: no generic plan shared by every tenant.
        const mode = await one.query<{ plan_cache_mode: string }>("SHOW plan_cache_mode");
        expect(mode.rows[0]!.plan_cache_mode).toBe("force_custom_plan");
        const counts = await one.query<{ generic_plans: string; custom_plans: string }>(
          "SELECT generic_plans, custom_plans FROM pg_prepared_statements",
        );
        expect(counts.rows.every((r) => Number(r.generic_plans) === 0)).toBe(true);
        expect(counts.rows.some((r) => Number(r.custom_plans) >= 2)).toBe(true);
      } finally {
        await one.close();
      }
    });

    it("a read backend on DATABASE_READ_URL answers from the replica; writes go to the primary", async () => {
      // The "replica": a second database loaded with the same data by the test, then changed behind
      // the service's back, so that an answer shows which database it came from.
      const replica = await createTestServices("postgres", { fixture: "sample", databaseDirect: true });
      try {
        if (replica.db.kind !== "postgres") throw new Error("expected PostgreSQL");
        await replica.db.query(
          `UPDATE "TB_ANAG_CITY00" SET "NAME" = 'Milano (replica)' WHERE "CITY_ID" = 'MI' AND "TENANT_ID" = 'acme'`,
        );
        const config = loadConfig({
          LOG_LEVEL: "silent",
          JWT_SECRET: TEST_JWT_SECRET,
          DEMO_DATA: "false",
          DATABASE_URL: url,
          DATABASE_READ_URL: replica.db.connectionString,
        });
        const services = await openServices(config, { logger: createLogger("silent") });
        const app = await buildApp(services);
        try {
          const token = await loginAs(app, "anna", "anna-secret-1");
          const read = await app.inject({
            url: "/api/v4/core/CITY/MI?source=anag-3",
            headers: bearer(token),
          });
          expect(read.json().data.NAME).toBe("Milano (replica)");
          const list = await app.inject({
            url: "/api/v4/core/CITY?source=anag-3&filter[CITY_ID]=MI",
            headers: bearer(token),
          });
          expect(list.json().data[0].NAME).toBe("Milano (replica)");
          const write = await app.inject({
            method: "POST",
            url: "/api/v4/core/CITY?source=anag-3",
            headers: bearer(token),
            payload: { data: { CITY_ID: "PRI", NAME: "Primary only", COUNTRY: "IT" } },
          });
          expect(write.statusCode).toBe(201);
          const onPrimary = await services.db.query(`SELECT 1 FROM "TB_ANAG_CITY00" WHERE "CITY_ID" = 'PRI'`);
          const onReplica = await replica.db.query(`SELECT 1 FROM "TB_ANAG_CITY00" WHERE "CITY_ID" = 'PRI'`);
          expect([onPrimary.rows.length, onReplica.rows.length]).toEqual([1, 0]);
        } finally {
          await app.close();
          await services.close();
        }
      } finally {
        await replica.close();
      }
    });

    it("with DATABASE_READ_URL, list reads go through the replica handle", async () => {
      const config = loadConfig({
        LOG_LEVEL: "silent",
        JWT_SECRET: TEST_JWT_SECRET,
        DEMO_DATA: "false",
        DATABASE_URL: url,
        DATABASE_READ_URL: url,
      });
      const services = await openServices(config, { logger: createLogger("silent") });
      const app = await buildApp(services);
      try {
        expect(services.readDb).not.toBe(services.db);
        const token = await loginAs(app, "anna", "anna-secret-1");
        const res = await app.inject({ url: "/api/v4/core/CUST?source=anag-1", headers: bearer(token) });
        expect(res.statusCode).toBe(200);
        expect(res.json().meta.total).toBe(4);
      } finally {
        await app.close();
        await services.close();
      }
    });
  });
}
