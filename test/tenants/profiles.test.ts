// Databases per tenant (issue 36 §2, decisions.md §18): profiles from DATABASE_URL_<NAME>, a
// tenant's records, outbox, webhooks and history in its profile's database, metadata and users in
// the main's; a metadata change reaches every database's tables or none; a tenant naming an
// unknown profile stops start-up and the import with a message naming both.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { describeStartupError } from "../../src/cli/startup-error.ts";
import { loadConfig } from "../../src/config.ts";
import { migrate } from "../../src/db/migrate.ts";
import type { DatabaseHandle } from "../../src/db/database.ts";
import { databaseApiError } from "../../src/db/errors.ts";
import { createDatabaseProfiles, UnknownProfileError } from "../../src/db/profiles.ts";
import { importFixture } from "../../src/fixtures/import.ts";
import { openServices } from "../../src/services.ts";
import { createLogger } from "../../src/logger.ts";
import { bearer, loginAs, UNLIMITED_ENV } from "../helpers/auth.ts";
import {
  createTestApp,
  createTestDatabase,
  TEST_DATABASE_URL,
  TEST_JWT_SECRET,
  type TestApp,
} from "../helpers/env.ts";
import { eventually } from "../events/support.ts";
import { createProfileDatabase, type ProfileDatabase, sampleWithGlobexOn } from "./helpers.ts";

describe("database profiles in the configuration", () => {
  const base = { LOG_LEVEL: "silent", JWT_SECRET: TEST_JWT_SECRET };

  it("reads DATABASE_URL_<NAME> and DATABASE_READ_URL_<NAME>, names upper-case", () => {
    const config = loadConfig({
      ...base,
      DATABASE_URL: "postgres://u@h/main",
      DATABASE_URL_eu: "postgres://u@h/eu",
      DATABASE_READ_URL_EU: "postgres://u@replica/eu",
      DATABASE_URL_US_EAST: "postgresql://u@h/us",
      DATABASE_LISTEN_URL_US_EAST: "postgresql://u@direct/us",
    });
    expect(config.databaseProfiles).toEqual({
      EU: { url: "postgres://u@h/eu", readUrl: "postgres://u@replica/eu", listenUrl: null },
      US_EAST: { url: "postgresql://u@h/us", readUrl: null, listenUrl: "postgresql://u@direct/us" },
    });
    expect(loadConfig(base).databaseProfiles).toEqual({});
  });

  it("refuses a bad URL, a read URL without its profile and the name MAIN, naming the variable", () => {
    expect(() =>
      loadConfig({
        ...base,
        DATABASE_URL_EU: "mysql://h/eu",
        DATABASE_READ_URL_US: "postgres://h/us",
        DATABASE_LISTEN_URL_CA: "postgres://h/ca",
        DATABASE_URL_MAIN: "postgres://h/x",
        DATABASE_URL_9X: "postgres://h/x",
      }),
    ).toThrow(
      expect.objectContaining({
        problems: expect.arrayContaining([
          "DATABASE_URL_EU: must be a postgres:// or postgresql:// URL",
          "DATABASE_READ_URL_US: DATABASE_URL_US is not set",
          "DATABASE_LISTEN_URL_CA: DATABASE_URL_CA is not set",
          "DATABASE_URL_MAIN: MAIN is the main database (DATABASE_URL), not a profile name",
          "DATABASE_URL_9X: the profile name must be a letter then letters, digits or _ (at most 63)",
        ]),
      }),
    );
  });

  it("needs DATABASE_URL: the embedded database cannot be the main of profiles", async () => {
    const config = loadConfig({ ...base, DATA_DIR: "/nonexistent", DATABASE_URL_EU: "postgres://h/eu" });
    await expect(openServices(config, { logger: createLogger("silent") })).rejects.toThrow(
      /DATABASE_URL: required when database profiles/,
    );
  });
});

describe("a profile's database gone under a request: the answer names the profile", () => {
  const refused = () =>
    Object.assign(new Error("connect ECONNREFUSED 10.0.0.9:5432"), { code: "ECONNREFUSED" });
  /** A handle whose every statement fails as an unreachable database's; `inside` runs in its transactions. */
  const unreachable = (): DatabaseHandle =>
    ({
      kind: "postgres",
      query: async () => {
        throw refused();
      },
      transaction: async (fn: (tx: unknown) => Promise<unknown>) =>
        fn({ query: async () => Promise.reject(refused()) }),
      close: async () => {},
    }) as unknown as DatabaseHandle;
  const profiles = () =>
    createDatabaseProfiles({
      main: unreachable(),
      profiles: { US: { url: "postgres://h/us", readUrl: null, listenUrl: null } },
      open: () => unreachable(),
      prepare: async () => {},
    });

  it("a statement of the profile's handle, in or out of a transaction: 503 naming the profile", async () => {
    const p = profiles();
    const outside = await p
      .handle("US")
      .query("SELECT 1")
      .catch((e: unknown) => e);
    const inside = await p
      .handle("US")
      .transaction((tx) => tx.query("SELECT 1"))
      .catch((e: unknown) => e);
    for (const err of [outside, inside]) {
      expect(databaseApiError(err)?.toBody()).toMatchObject({
        status: 503,
        code: "DATABASE_UNAVAILABLE",
        message: "The tenant's database (profile US) is not reachable right now; retry shortly.",
        details: { profile: "US" },
      });
      expect(databaseApiError(err)?.headers).toMatchObject({ "Retry-After": "1" });
    }
  });

  it("the main database's errors, even inside a profile's transaction, are the main's", async () => {
    const p = profiles();
    const main = await p.main.query("SELECT 1").catch((e: unknown) => e);
    const mainInside = await p
      .handle("US")
      .transaction(() => p.main.query("SELECT 1"))
      .catch((e: unknown) => e);
    for (const err of [main, mainInside]) {
      const body = databaseApiError(err)?.toBody();
      expect(body).toMatchObject({
        code: "DATABASE_UNAVAILABLE",
        message: "The database is not reachable right now; retry shortly.",
      });
      expect(body?.details).toBeUndefined();
    }
  });
});

if (TEST_DATABASE_URL)
  describe("a tenant on a database profile (postgres)", () => {
    let eu: ProfileDatabase;
    let t: TestApp;
    let greta: string;
    let anna: string;
    beforeAll(async () => {
      eu = await createProfileDatabase();
      t = await createTestApp("postgres", {
        fixture: await sampleWithGlobexOn("EU"),
        env: { ...UNLIMITED_ENV, DATABASE_URL_EU: eu.url },
        ...(process.env.DEBUG_TENANTS ? { logger: createLogger("error") } : {}),
      });
      [greta, anna] = await Promise.all([
        loginAs(t.app, "greta", "greta-secret-4"),
        loginAs(t.app, "anna", "anna-secret-1"),
      ]);
    });
    afterAll(async () => {
      await t?.close();
      await eu?.drop();
    });

    const mainRows = async (sql: string, params: unknown[] = []) =>
      (await t.services.db.query(sql, params)).rows;
    const tenantsOf = (rows: Array<Record<string, unknown>>) => rows.map((r) => r.TENANT_ID);

    it("keeps TB_TENANT.DATABASE; the import put globex's records in EU, acme's in main", async () => {
      expect(await mainRows(`SELECT "TENANT_ID", "DATABASE" FROM "TB_TENANT" ORDER BY 1`)).toEqual([
        { TENANT_ID: "acme", DATABASE: null },
        { TENANT_ID: "globex", DATABASE: "EU" },
      ]);
      const inEu = await eu.query<{ TENANT_ID: string; n: number }>(
        `SELECT "TENANT_ID", count(*)::int AS n FROM "TB_ANAG_CITY00" GROUP BY 1`,
      );
      expect(inEu).toEqual([{ TENANT_ID: "globex", n: 4 }]);
      const inMain = await mainRows(
        `SELECT "TENANT_ID", count(*)::int AS n FROM "TB_ANAG_CITY00" GROUP BY 1`,
      );
      expect(inMain).toEqual([{ TENANT_ID: "acme", n: 4 }]);
      // Metadata, users and sessions are the main's: the profile's copies of those tables are empty.
      expect(await eu.query(`SELECT count(*)::int AS n FROM "TB_DIM"`)).toEqual([{ n: 0 }]);
      expect(await eu.query(`SELECT count(*)::int AS n FROM "TB_USER"`)).toEqual([{ n: 0 }]);
      expect(await eu.query(`SELECT count(*)::int AS n FROM "TB_ANAG_SESSIONS00"`)).toEqual([{ n: 0 }]);
      expect((await mainRows(`SELECT count(*)::int AS n FROM "TB_ANAG_SESSIONS00"`))[0]).toEqual({ n: 2 });
    });

    it("writes a tenant's record and its outbox row into its profile's database, and reads them back there", async () => {
      const res = await t.app.inject({
        method: "POST",
        url: "/api/v4/core/CITY?source=anag-3",
        headers: bearer(greta),
        payload: { data: { CITY_ID: "G-NEW", NAME: "Geneva", COUNTRY: "CH" } },
      });
      expect(res.statusCode, res.body).toBe(201);
      const eventId = res.json().event_id as string;
      expect(
        await eu.query(`SELECT "TENANT_ID", "NAME" FROM "TB_ANAG_CITY00" WHERE "CITY_ID" = 'G-NEW'`),
      ).toEqual([{ TENANT_ID: "globex", NAME: "Geneva" }]);
      expect(await mainRows(`SELECT 1 FROM "TB_ANAG_CITY00" WHERE "CITY_ID" = 'G-NEW'`)).toEqual([]);
      const outbox = await eu.query(
        `SELECT "TENANT_ID", "EVENT_TYPE", "AGGREGATE_ID" FROM "TB_ANAG_OUTBOX00" WHERE "OUTBOX_ID" = $1`,
        [eventId],
      );
      expect(outbox).toEqual([{ TENANT_ID: "globex", EVENT_TYPE: "CITYCreated", AGGREGATE_ID: "G-NEW" }]);
      expect(
        tenantsOf(
          await mainRows(`SELECT "TENANT_ID" FROM "TB_ANAG_OUTBOX00" WHERE "AGGREGATE_ID" = 'G-NEW'`),
        ),
      ).toEqual([]);

      // Read back over REST and GraphQL from the profile; acme's reads stay on main.
      const read = await t.app.inject({
        method: "GET",
        url: "/api/v4/core/CITY/G-NEW?source=anag-3",
        headers: bearer(greta),
      });
      expect(read.statusCode, read.body).toBe(200);
      expect(read.json().data).toMatchObject({ CITY_ID: "G-NEW", NAME: "Geneva" });
      const list = await t.app.inject({
        method: "GET",
        url: "/api/v4/core/CITY?source=anag-3&$num_rows=100",
        headers: bearer(greta),
      });
      expect(list.statusCode, list.body).toBe(200);
      expect(list.json().data).toHaveLength(5);
      const acme = await t.app.inject({
        method: "GET",
        url: "/api/v4/core/CITY?source=anag-3&$num_rows=100",
        headers: bearer(anna),
      });
      expect(acme.json().data.map((c: { CITY_ID: string }) => c.CITY_ID)).not.toContain("G-NEW");
      expect(acme.json().data).toHaveLength(4);
      const gql = await t.app.inject({
        method: "POST",
        url: "/graphql",
        headers: bearer(greta),
        payload: {
          query: `{ CITY(source: "anag-3", where: { CITY_ID: { _eq: "G-NEW" } }) { data { NAME } } }`,
        },
      });
      expect(gql.statusCode, gql.body).toBe(200);
      expect(gql.json()).toEqual({ data: { CITY: { data: [{ NAME: "Geneva" }] } } });
    });

    it("a metadata change alters the tables of every database", async () => {
      const res = await t.app.inject({
        method: "POST",
        url: "/api/v4/core/VAR?source=erp",
        headers: bearer(anna),
        payload: {
          data: {
            COD_DIM: "CITY",
            NUM_VAR: 40,
            COD_VAR: "ZIP",
            DESC_VAR: "Zip",
            DATA_TYPE: "STRING",
            LENGTH: 10,
          },
        },
      });
      expect(res.statusCode, res.body).toBe(201);
      const column = `SELECT column_name FROM information_schema.columns WHERE table_name = 'TB_ANAG_CITY00' AND column_name = 'ZIP'`;
      expect(await mainRows(column)).toEqual([{ column_name: "ZIP" }]);
      expect(await eu.query(column)).toEqual([{ column_name: "ZIP" }]);
    });

    it("a metadata change that one profile's rows forbid is refused as a whole, main included", async () => {
      const patch = (data: Record<string, unknown>) =>
        t.app.inject({
          method: "PATCH",
          url: "/api/v4/core/VAR/CITY/ZIP?source=erp",
          headers: bearer(anna),
          payload: { data },
        });
      // ZIP holds a value in EU (globex's city) and none in main.
      const written = await t.app.inject({
        method: "PATCH",
        url: "/api/v4/core/CITY/G-NEW?source=anag-3",
        headers: bearer(greta),
        payload: { data: { ZIP: "1201" } },
      });
      expect(written.statusCode, written.body).toBe(200);
      expect((await mainRows(`SELECT count("ZIP")::int AS n FROM "TB_ANAG_CITY00"`))[0]).toEqual({ n: 0 });
      const refused = await patch({ DATA_TYPE: "DATE" });
      expect(refused.statusCode, refused.body).toBe(409);
      expect(refused.json()).toMatchObject({
        code: "UNSAFE_SCHEMA_CHANGE",
        errors: [{ field: "CITY.ZIP", message: expect.stringContaining("from STRING to DATE") }],
      });
      const type = `SELECT data_type FROM information_schema.columns WHERE table_name = 'TB_ANAG_CITY00' AND column_name = 'ZIP'`;
      expect(await mainRows(type)).toEqual([{ data_type: "character varying" }]);
      expect(await eu.query(type)).toEqual([{ data_type: "character varying" }]);
      expect(
        await mainRows(`SELECT "DATA_TYPE" FROM "TB_VAR" WHERE "COD_DIM" = 'CITY' AND "COD_VAR" = 'ZIP'`),
      ).toEqual([{ DATA_TYPE: "STRING" }]);
    });

    it("a tenant changed by SQL to a profile that is not configured gets 503 naming it", async () => {
      const refreshed = new Promise<void>((resolve) => {
        const off = t.services.profiles.onRefresh(() => {
          if (t.services.profiles.placement("globex").profile === "NOPE") {
            off();
            resolve();
          }
        });
      });
      await t.services.db.query(`UPDATE "TB_TENANT" SET "DATABASE" = 'NOPE' WHERE "TENANT_ID" = 'globex'`);
      await refreshed;
      try {
        const res = await t.app.inject({
          method: "GET",
          url: "/api/v4/core/CITY?source=anag-3",
          headers: bearer(greta),
        });
        expect(res.statusCode).toBe(503);
        expect(res.json()).toMatchObject({
          code: "DATABASE_UNAVAILABLE",
          message:
            "Tenant globex names the database profile NOPE (TB_TENANT.DATABASE), which is not configured: set DATABASE_URL_NOPE, or change the tenant's DATABASE.",
          details: { profile: "NOPE" },
        });
      } finally {
        await t.services.db.query(`UPDATE "TB_TENANT" SET "DATABASE" = 'EU' WHERE "TENANT_ID" = 'globex'`);
        await t.services.profiles.refresh();
      }
    });

    it("lists every profile on /healthz; /readyz is the main's", async () => {
      const health = await t.app.inject({ method: "GET", url: "/healthz" });
      expect(health.json()).toMatchObject({ dependencies: { database: "up", database_eu: "up" } });
      // No DATABASE_READ_URL_EU here: no replica listed.
      expect(health.json().dependencies).not.toHaveProperty("database_read_eu");
      const ready = await t.app.inject({ method: "GET", url: "/readyz" });
      expect(ready.statusCode).toBe(200);
    });

    it("lists a profile's read replica too (up, or down while unreachable), outside /readyz", async () => {
      for (const [replica, state] of [
        [eu.url, "up"],
        ["postgres://nobody@127.0.0.1:1/none", "down"],
      ] as const) {
        const other = await createTestApp("postgres", {
          env: { ...UNLIMITED_ENV, DATABASE_URL_EU: eu.url, DATABASE_READ_URL_EU: replica },
        });
        try {
          const health = await other.app.inject({ method: "GET", url: "/healthz" });
          expect(health.json().dependencies).toMatchObject({ database_eu: "up", database_read_eu: state });
          const metrics = (await other.app.inject({ method: "GET", url: "/metrics" })).body;
          expect(metrics).toContain(
            `dimensio_dependency_up{dependency="database_read_eu",role="all"} ${state === "up" ? 1 : 0}`,
          );
          expect((await other.app.inject({ method: "GET", url: "/readyz" })).statusCode).toBe(200);
        } finally {
          await other.close();
        }
      }
    });
  });

if (TEST_DATABASE_URL)
  describe("a tenant naming a profile that is not configured (postgres)", () => {
    it("the import refuses it, naming the tenant and the profile", async () => {
      const t = await createTestApp("postgres", { env: UNLIMITED_ENV });
      try {
        await expect(importFixture(t.services, await sampleWithGlobexOn("NOWHERE"))).rejects.toMatchObject({
          code: "INVALID_METADATA",
          errors: expect.arrayContaining([
            {
              field: "tenants[1].DATABASE",
              message:
                "tenant globex names the database profile NOWHERE, which is not configured (set DATABASE_URL_NOWHERE)",
            },
          ]),
        });
        expect((await t.services.db.query(`SELECT 1 FROM "TB_TENANT"`)).rows).toEqual([]);
      } finally {
        await t.close();
      }
    });

    it("start-up fails with a message naming both, not a stack trace", async () => {
      const db = await createTestDatabase("postgres");
      const config = loadConfig({ LOG_LEVEL: "silent", JWT_SECRET: TEST_JWT_SECRET, DEMO_DATA: "false" });
      await migrate(db);
      await db.query(`INSERT INTO "TB_TENANT" ("TENANT_ID", "DATABASE") VALUES ('lost', 'ARCHIVE')`);
      try {
        const err = await openServices(config, { db }).then(
          () => null,
          (e: unknown) => e,
        );
        expect(err).toBeInstanceOf(UnknownProfileError);
        expect(describeStartupError(err)).toBe(
          "Tenant lost names the database profile ARCHIVE (TB_TENANT.DATABASE), which is not configured: set DATABASE_URL_ARCHIVE, or change the tenant's DATABASE.",
        );
      } finally {
        // Closed (and dropped) by the failed start already.
        await db.close().catch(() => {});
      }
    });
  });

if (TEST_DATABASE_URL)
  describe("closing the services (postgres)", () => {
    it("closes every profile's connections", async () => {
      const eu = await createProfileDatabase();
      try {
        const t = await createTestApp("postgres", {
          fixture: await sampleWithGlobexOn("EU"),
          env: { ...UNLIMITED_ENV, DATABASE_URL_EU: eu.url },
        });
        const others = async () =>
          (
            await eu.query<{ n: number }>(
              `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`,
            )
          )[0]!.n;
        const token = await loginAs(t.app, "greta", "greta-secret-4");
        const res = await t.app.inject({
          method: "GET",
          url: "/api/v4/core/CITY?source=anag-3",
          headers: bearer(token),
        });
        expect(res.statusCode).toBe(200);
        expect(await others()).toBeGreaterThan(0);
        await t.close();
        await eventually(async () => (await others()) === 0, { what: "the profile's connections closed" });
      } finally {
        await eu.drop();
      }
    });
  });
