// TB_VAR.INDEXED (decisions.md §2, issue 11): the DDL sync makes an index on (TENANT_ID, field, id)
// for an INDEXED field, the planner uses it (a sort on the field needs no sort step), and clearing
// INDEXED drops it again.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import pg from "pg";
import { fieldIndexName, indexBuildSql } from "../../src/ddl/sync.ts";
import { eventually } from "../events/support.ts";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";
import { type Client, clientFor, NO_RATE_LIMITS } from "../write/http.ts";

const custIndex = (field: string) => fieldIndexName("TB_ANAG_CUST00", field, "CUST_ID");

describe.each(BACKENDS)("INDEXED fields (%s)", (backend) => {
  let t: TestApp;
  let anna: Client;

  beforeAll(async () => {
    t = await createTestApp(backend, { fixture: "sample", env: NO_RATE_LIMITS });
    anna = await clientFor(t.app, "anna");
  });
  afterAll(async () => {
    await t?.close();
  });

  async function indexes(table: string): Promise<string[]> {
    const res = await t.services.db.query<{ indexname: string }>(
      "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND tablename = $1 ORDER BY 1",
      [table],
    );
    return res.rows.map((r) => r.indexname);
  }

  it("the sample's INDEXED fields have their index, and a filter on one uses it", async () => {
    expect(await indexes("TB_ANAG_CUST00")).toContain(custIndex("NAME"));
    const plan = await t.services.db.transaction(async (tx) => {
      await tx.query("SET LOCAL enable_seqscan = off");
      const res = await tx.query<{ "QUERY PLAN": string }>(
        `EXPLAIN SELECT * FROM "TB_ANAG_CUST00" WHERE "TENANT_ID" = 'acme' AND "NAME" = 'Rossi Srl'`,
      );
      return res.rows.map((r) => r["QUERY PLAN"]).join("\n");
    });
    expect(plan).toContain(custIndex("NAME"));
  });

  it("a list sorted by an INDEXED field reads its index in order: the id's tie-break needs no sort", async () => {
    const res = await anna.get(
      "/api/v4/core/CUST?source=anag-1&filter[CITY_ID]=MI&sort=NAME&$num_rows=2&$count=none&debug=true",
    );
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const { sql, params } = res.body.debug as { sql: string; params: unknown[] };
    expect(sql).toContain(`ORDER BY t."NAME" ASC, t."CUST_ID" ASC`);
    const plan = await t.services.db.transaction(async (tx) => {
      // Whatever the sample's few rows would make cheapest: any sort is priced out.
      for (const off of ["enable_seqscan", "enable_sort", "enable_incremental_sort", "enable_bitmapscan"]) {
        await tx.query(`SET LOCAL ${off} = off`);
      }
      const res = await tx.query<{ "QUERY PLAN": string }>(`EXPLAIN ${sql}`, params);
      return res.rows.map((r) => r["QUERY PLAN"]).join("\n");
    });
    expect(plan).toContain(custIndex("NAME"));
    expect(plan).not.toMatch(/Sort/);
  });

  it("setting INDEXED through a metadata write adds the index; clearing it drops it", async () => {
    const name = custIndex("CODE");
    expect(await indexes("TB_ANAG_CUST00")).not.toContain(name);
    const on = await anna.patch("/api/v4/core/VAR/CUST/CODE?source=erp", { data: { INDEXED: true } });
    expect(on.status, JSON.stringify(on.body)).toBe(200);
    expect(await indexes("TB_ANAG_CUST00")).toContain(name);
    const off = await anna.patch("/api/v4/core/VAR/CUST/CODE?source=erp", { data: { INDEXED: false } });
    expect(off.status).toBe(200);
    expect(await indexes("TB_ANAG_CUST00")).not.toContain(name);
    // A foreign key keeps its own index whatever INDEXED says.
    expect(await indexes("TB_ANAG_CUST00")).toContain(custIndex("CITY_ID"));
  });

  it("TEXT, JSON and MEDIA fields cannot be INDEXED", async () => {
    const res = await anna.patch("/api/v4/core/VAR/CUST/NOTES?source=erp", { data: { INDEXED: true } });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe("INVALID_METADATA");
    expect(JSON.stringify(res.body.errors)).toContain("INDEXED");
  });

  if (backend === "postgres") {
    it("on PostgreSQL the index of a live table is built CONCURRENTLY: writes go on while it waits", async () => {
      if (t.services.db.kind !== "postgres") throw new Error("PostgreSQL expected");
      const name = custIndex("EMAIL");
      // Another session holds an open write on the table: an index build has to wait for it.
      const other = new pg.Pool({ connectionString: t.services.db.connectionString, max: 2 });
      try {
        const holder = await other.connect();
        await holder.query("BEGIN");
        await holder.query(`UPDATE "TB_ANAG_CUST00" SET "NOTES" = 'held' WHERE "TENANT_ID" = 'acme'`);
        const patch = anna.patch("/api/v4/core/VAR/CUST/EMAIL?source=erp", { data: { INDEXED: true } });
        await eventually(
          async () => {
            const { rows } = await t.services.db.query(
              `SELECT 1 FROM pg_stat_activity WHERE query LIKE 'CREATE INDEX CONCURRENTLY%' AND wait_event IS NOT NULL`,
            );
            return rows.length > 0;
          },
          { what: "the index build waiting" },
        );
        // A plain CREATE INDEX would queue its SHARE lock ahead of this write and block it.
        const writer = await other.connect();
        await writer.query("SET lock_timeout = '3s'");
        await writer.query(`UPDATE "TB_ANAG_CUST00" SET "SALES_REP" = 'w' WHERE "TENANT_ID" = 'globex'`);
        writer.release();
        await holder.query("ROLLBACK");
        holder.release();
        expect((await patch).status).toBe(200);
        const { rows } = await t.services.db.query<{ indisvalid: boolean }>(
          `SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = $1`,
          [name],
        );
        expect(rows).toEqual([{ indisvalid: true }]);
      } finally {
        await other.end();
      }
    });
  }

  it("an index build's statement, in the transaction or deferred CONCURRENTLY", () => {
    const create = { kind: "create", name: "ix", table: "T", columns: ["TENANT_ID", "A"] } as const;
    expect(indexBuildSql(create, { concurrently: false })).toBe(
      'CREATE INDEX IF NOT EXISTS "ix" ON "T" ("TENANT_ID", "A")',
    );
    expect(indexBuildSql(create, { concurrently: true })).toBe(
      'CREATE INDEX CONCURRENTLY IF NOT EXISTS "ix" ON "T" ("TENANT_ID", "A")',
    );
    expect(indexBuildSql({ kind: "drop", name: "ix" }, { concurrently: true })).toBe(
      'DROP INDEX CONCURRENTLY IF EXISTS "ix"',
    );
  });
});

// An index a metadata change adds is built after the commit, on a connection of its own, bounded
// by INDEX_BUILD_TIMEOUT_MS rather than by the statement timeout of requests: a large table's build
// outlasts the latter. Held here by an open write on the table, which the build waits for (that
// wait counts against a statement timeout as the build itself does).
if (BACKENDS.includes("postgres"))
  describe("index builds and their own time bound (postgres)", () => {
    let t: TestApp;
    let anna: Client;
    beforeAll(async () => {
      t = await createTestApp("postgres", {
        fixture: "sample",
        env: { ...NO_RATE_LIMITS, STATEMENT_TIMEOUT_MS: "1000", INDEX_BUILD_TIMEOUT_MS: "3000" },
      });
      anna = await clientFor(t.app, "anna");
    });
    afterAll(async () => {
      await t?.close();
    });

    /** Holds an open write on CUST until `release`; the build waits for it. */
    async function holdTable() {
      if (t.services.db.kind !== "postgres") throw new Error("PostgreSQL expected");
      const holder = new pg.Client({ connectionString: t.services.db.connectionString });
      await holder.connect();
      await holder.query("BEGIN");
      await holder.query(`UPDATE "TB_ANAG_CUST00" SET "NOTES" = 'held' WHERE "TENANT_ID" = 'acme'`);
      return {
        async release() {
          await holder.query("ROLLBACK");
          await holder.end();
        },
      };
    }

    /** Resolves once the build has waited longer than `ms` on its own connection. */
    const buildWaited = (ms: number) =>
      eventually(
        async () => {
          const { rows } = await t.services.db.query(
            `SELECT 1 FROM pg_stat_activity
            WHERE application_name = 'dimensio-maintenance' AND query LIKE 'CREATE INDEX CONCURRENTLY%'
              AND now() - query_start > make_interval(secs => $1::float / 1000)`,
            [ms],
          );
          return rows.length > 0;
        },
        { what: `the index build waiting ${ms} ms`, timeoutMs: 10_000 },
      );

    /** Resolves once a statement starting with `prefix` waits on the maintenance connection. */
    const maintenanceWaiting = (prefix: string) =>
      eventually(
        async () => {
          const { rows } = await t.services.db.query(
            `SELECT 1 FROM pg_stat_activity
              WHERE application_name = 'dimensio-maintenance' AND starts_with(query, $1) AND wait_event IS NOT NULL`,
            [prefix],
          );
          return rows.length > 0;
        },
        { what: `${prefix} waiting`, timeoutMs: 10_000 },
      );

    const validity = async (name: string) =>
      (
        await t.services.db.query<{ indisvalid: boolean }>(
          `SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = $1`,
          [name],
        )
      ).rows;

    it("a build longer than the statement timeout (1 s) completes within INDEX_BUILD_TIMEOUT_MS (3 s)", async () => {
      const held = await holdTable();
      const patch = anna.patch("/api/v4/core/VAR/CUST/EMAIL?source=erp", { data: { INDEXED: true } });
      try {
        await buildWaited(1500);
      } finally {
        await held.release();
      }
      expect((await patch).status).toBe(200);
      expect(await validity(custIndex("EMAIL"))).toEqual([{ indisvalid: true }]);
    });

    it("a build past INDEX_BUILD_TIMEOUT_MS is cancelled: the saved change answers 200 with a warning, no invalid index left behind, the next change builds it", async () => {
      const versionBefore = t.services.metadata.current().version;
      const held = await holdTable();
      const patch = anna.patch("/api/v4/core/VAR/CUST/CODE?source=erp", { data: { INDEXED: true } });
      try {
        // The build is cancelled at 3 s; the invalid index it leaves is dropped (CONCURRENTLY
        // too, which waits for the same write): the write goes once the drop waits.
        await maintenanceWaiting("DROP INDEX CONCURRENTLY");
      } finally {
        await held.release();
      }
      const res = await patch;
      // The change committed: a success naming what it left undone, not a 504 "failed".
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({
        data: { COD_DIM: "CUST", COD_VAR: "CODE", INDEXED: true },
        message: "VAR CUST/CODE updated; see warnings.",
        version: versionBefore + 1,
      });
      expect(res.body.warnings).toEqual([
        {
          code: "INDEX_BUILD_TIMEOUT",
          message: `The change was saved, but index ${custIndex("CODE")} of CUST was not built: it ran past INDEX_BUILD_TIMEOUT_MS (3000 ms, for the change's index work) and was cancelled, and its invalid index was dropped. The next change to CUST's DIM, VAR or OBJECT metadata builds it; raise INDEX_BUILD_TIMEOUT_MS for a large table.`,
          details: {
            dimension: "CUST",
            index: custIndex("CODE"),
            timeout_ms: 3000,
            invalid_index_dropped: true,
          },
        },
      ]);
      expect(await validity(custIndex("CODE"))).toEqual([]);
      // The change is visible: stored, and served by the registry.
      const stored = await t.services.db.query<{ INDEXED: unknown }>(
        `SELECT "INDEXED" FROM "TB_VAR" WHERE "COD_DIM" = 'CUST' AND "COD_VAR" = 'CODE'`,
      );
      expect(stored.rows[0]?.INDEXED).toBe(res.body.data.INDEXED);
      const model = t.services.metadata.current();
      expect(model.version).toBe(versionBefore + 1);
      expect(model.dimensions.get("CUST")?.fields.find((f) => f.code === "CODE")?.indexed).toBe(true);
      // The next change of the dimension's metadata builds it.
      const next = await anna.patch("/api/v4/core/VAR/CUST/EMAIL?source=erp", { data: { INDEXED: false } });
      expect(next.status).toBe(200);
      expect(next.body.warnings).toBeUndefined();
      expect(await validity(custIndex("CODE"))).toEqual([{ indisvalid: true }]);
    });
  });
