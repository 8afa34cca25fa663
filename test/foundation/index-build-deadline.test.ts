// INDEX_BUILD_TIMEOUT_MS bounds a metadata change's index work as a whole, not each build: a change
// whose index is built in the main database and again in a profile's (each database builds its
// own) took up to twice the bound, past what the gateway waits for it (src/gateway/routing.ts).
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fieldIndexName } from "../../src/ddl/sync.ts";
import { eventually } from "../events/support.ts";
import { createTestApp, TEST_DATABASE_URL, type TestApp } from "../helpers/env.ts";
import { createProfileDatabase, type ProfileDatabase, sampleWithGlobexOn } from "../tenants/helpers.ts";
import { type Client, clientFor, NO_RATE_LIMITS } from "../write/http.ts";

const custIndex = (field: string) => fieldIndexName("TB_ANAG_CUST00", field, "CUST_ID");

if (TEST_DATABASE_URL)
  describe("INDEX_BUILD_TIMEOUT_MS bounds a change's index builds together (postgres, a profile)", () => {
    let eu: ProfileDatabase;
    let t: TestApp;
    let anna: Client;
    let mainUrl: string;
    beforeAll(async () => {
      eu = await createProfileDatabase();
      t = await createTestApp("postgres", {
        fixture: await sampleWithGlobexOn("EU"),
        env: {
          ...NO_RATE_LIMITS,
          STATEMENT_TIMEOUT_MS: "1000",
          INDEX_BUILD_TIMEOUT_MS: "3000",
          DATABASE_URL_EU: eu.url,
        },
      });
      if (t.services.db.kind !== "postgres") throw new Error("PostgreSQL expected");
      mainUrl = t.services.db.connectionString;
      anna = await clientFor(t.app, "anna");
    });
    afterAll(async () => {
      await t?.close();
      await eu?.drop();
    });

    /** Holds an open write on a database's CUST rows of `tenant` until `release`: a build waits for it. */
    async function holdCustomers(url: string, tenant: string) {
      const holder = new pg.Client({ connectionString: url });
      await holder.connect();
      await holder.query("BEGIN");
      await holder.query(`UPDATE "TB_ANAG_CUST00" SET "NOTES" = 'held' WHERE "TENANT_ID" = $1`, [tenant]);
      return {
        async release() {
          await holder.query("ROLLBACK");
          await holder.end();
        },
      };
    }

    /** Resolves once a maintenance statement starting with `prefix` has waited `ms` in `database`. */
    const maintenanceWaited = (database: string, prefix: string, ms = 0) =>
      eventually(
        async () => {
          const { rows } = await t.services.db.query(
            `SELECT 1 FROM pg_stat_activity
              WHERE application_name = 'dimensio-maintenance' AND datname = $1 AND starts_with(query, $2)
                AND wait_event IS NOT NULL AND now() - query_start >= make_interval(secs => $3::float / 1000)`,
            [database, prefix, ms],
          );
          return rows.length > 0;
        },
        { what: `${prefix} waiting ${ms} ms in ${database}`, timeoutMs: 15_000 },
      );

    const validity = async (url: string, name: string) => {
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      try {
        return (
          await c.query<{ indisvalid: boolean }>(
            `SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = $1`,
            [name],
          )
        ).rows;
      } finally {
        await c.end();
      }
    };

    it("the profile's build gets what the main's left of the bound: cancelled at 3 s from the first build's start, not 3 s after its own", async () => {
      const mainName = new URL(mainUrl).pathname.slice(1);
      const heldMain = await holdCustomers(mainUrl, "acme");
      const heldEu = await holdCustomers(eu.url, "globex");
      const started = Date.now();
      const patch = anna.patch("/api/v4/core/VAR/CUST/EMAIL?source=erp", { data: { INDEXED: true } });
      let euCancelledAfter = Number.NaN;
      try {
        // The main database's build waits 2 s for its write, then goes through.
        await maintenanceWaited(mainName, "CREATE INDEX CONCURRENTLY", 2000);
        await heldMain.release();
        // The profile's build waits for its own write until the change's bound runs out; its
        // invalid index's drop then waits for the same write.
        await maintenanceWaited(eu.name, "DROP INDEX CONCURRENTLY");
        euCancelledAfter = Date.now() - started;
      } finally {
        await heldEu.release();
      }
      const res = await patch;
      expect(res.status).toBe(200);
      expect(res.body.warnings).toEqual([
        {
          code: "INDEX_BUILD_TIMEOUT",
          message: `The change was saved, but index ${custIndex("EMAIL")} of CUST in the database of profile EU was not built: it ran past INDEX_BUILD_TIMEOUT_MS (3000 ms, for the change's index work) and was cancelled, and its invalid index was dropped. The next change to CUST's DIM, VAR or OBJECT metadata builds it; raise INDEX_BUILD_TIMEOUT_MS for a large table.`,
          details: {
            dimension: "CUST",
            index: custIndex("EMAIL"),
            timeout_ms: 3000,
            invalid_index_dropped: true,
            database: "EU",
          },
        },
      ]);
      // Each build with a bound of its own would have been cancelled at 2 + 3 s at the earliest.
      expect(euCancelledAfter).toBeLessThan(4000);
      expect(await validity(mainUrl, custIndex("EMAIL"))).toEqual([{ indisvalid: true }]);
      expect(await validity(eu.url, custIndex("EMAIL"))).toEqual([]);
    });
  });
