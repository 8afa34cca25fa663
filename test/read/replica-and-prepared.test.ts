// Reads on PostgreSQL: DATABASE_READ_URL sends reads to the replica handle, and read statements
// run as named prepared statements, namespaced by the metadata version.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildApp } from "../../src/app.ts";
import { loadConfig } from "../../src/config.ts";
import { openPostgres } from "../../src/db/database.ts";
import { createLogger } from "../../src/logger.ts";
import { emptyListQuery, emptyRecordQuery } from "../../src/query/types.ts";
import { createReadContext, getRecord, listRecords } from "../../src/resolvers/read/index.ts";
import { openServices, type Services } from "../../src/services.ts";
import type { RequestContext } from "../../src/types.ts";
import { bearer, loginAs } from "../helpers/auth.ts";
import { BACKENDS, createTestServices, TEST_DATABASE_URL, TEST_JWT_SECRET } from "../helpers/env.ts";
import { planCacheMode, preparedPlans } from "../helpers/plans.ts";

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
        const inMilan = emptyListQuery({
          filter: { kind: "condition", field: "CITY_ID", op: "eq", value: "MI", origin: "test" },
          withTotal: false,
        });
        const first = await listRecords(rc, "CUST", inMilan);
        const again = await listRecords(rc, "CUST", inMilan);
        expect(again.data).toEqual(first.data);
        expect(first.data.map((c) => c.CITY_ID)).toEqual(["MI", "MI"]);
        const prepared = await one.query<{ name: string; statement: string }>(
          "SELECT name, statement FROM pg_prepared_statements",
        );
        const version = seeded.metadata.current().version;
        expect(prepared.rows.length).toBeGreaterThan(0);
        for (const p of prepared.rows) expect(p.name.startsWith(`d${version}_`)).toBe(true);
        expect(prepared.rows.some((p) => p.statement.includes('"TB_ANAG_CUST00"'))).toBe(true);
        // A filtered page is planned with its values at each execution: no generic plan shared by
        // every tenant and every value.
        expect(await planCacheMode(one)).toBe("force_custom_plan");
        expect(await preparedPlans(one, '%"CITY_ID" = $%')).toEqual({ generic: 0, custom: 2 });
      } finally {
        await one.close();
      }
    });

    it("a read by id alone (a record, a page in id order, its relations by their id) keeps one generic plan per connection, with the same answers", async () => {
      const one = openPostgres(url, { max: 1 });
      try {
        const custom = createReadContext({ db: seeded.db, metadata: seeded.metadata }, ctx("acme"));
        const rc = createReadContext({ db: one, metadata: seeded.metadata }, ctx("acme"));
        const sales = { ...ctx("acme"), source: "sales-1" };
        const orders = createReadContext({ db: one, metadata: seeded.metadata }, sales);
        const byId = () => getRecord(rc, "CUST", "1", emptyRecordQuery());
        const latest = emptyListQuery({
          sort: [{ field: "ORD_ID", direction: "desc" }],
          expand: ["CUST"],
          withTotal: false,
        });
        const page = () => listRecords(orders, "ORD", latest);
        const [record, list] = [await byId(), await page()];
        for (let i = 0; i < 2; i++) {
          expect((await byId()).data).toEqual(record.data);
          expect((await page()).data).toEqual(list.data);
        }
        expect(record.data.CUST_ID).toBe(1);
        expect(list.data.length).toBeGreaterThan(0);
        expect(list.data.every((o) => (o.CUST as { CUST_ID: unknown }).CUST_ID === o.CUST_ID)).toBe(true);
        // The same answers as statements planned with their values (another pool: custom plans).
        expect((await getRecord(custom, "CUST", "1", emptyRecordQuery())).data).toEqual(record.data);
        const customSales = createReadContext({ db: seeded.db, metadata: seeded.metadata }, sales);
        expect((await listRecords(customSales, "ORD", latest)).data).toEqual(list.data);
        expect(
          await preparedPlans(one, '%"TB_ANAG_CUST00"%WHERE t."TENANT_ID" = $1 AND t."CUST_ID" = $2%'),
        ).toEqual({
          generic: 3,
          custom: 0,
        });
        expect(await preparedPlans(one, "%LEFT JOIN LATERAL%")).toEqual({ generic: 3, custom: 0 });
        // The session is back to custom plans for whatever does not ask (src/db/connection.ts).
        await listRecords(
          rc,
          "CUST",
          emptyListQuery({ sort: [{ field: "NAME", direction: "asc" }], withTotal: false }),
        );
        expect(await preparedPlans(one, '%ORDER BY t."NAME" ASC%')).toEqual({ generic: 0, custom: 1 });
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
