// TB_DIM.INDEXES (docs/decisions.md, "Composite indexes declared in metadata", issue 39 §4): the
// DDL sync makes each declared composite index on (TENANT_ID, fields…, id), drops the ones no
// longer declared, rebuilds one left invalid, and a list filtered by one field and sorted by
// another reads it; invalid declarations are 400 and change nothing.
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { compositeIndexName, compositeIndexPrefix, fieldIndexName, syncTables } from "../../src/ddl/sync.ts";
import { buildModel } from "../../src/metadata/build.ts";
import { parseCompositeIndexes } from "../../src/metadata/composite-indexes.ts";
import type { DatabaseHandle } from "../../src/db/database.ts";
import { migrate } from "../../src/db/migrate.ts";
import type { DimensionDef, MetadataRows } from "../../src/types.ts";
import { BACKENDS, createTestApp, createTestDatabase, type TestApp } from "../helpers/env.ts";
import { type Client, clientFor, NO_RATE_LIMITS } from "../write/http.ts";

const TABLE = "TB_ANAG_CUST00";
const cityName = compositeIndexName(TABLE, ["CITY_ID", "NAME"], "CUST_ID");
const vipCredit = compositeIndexName(TABLE, ["VIP", "CREDIT_LIMIT"], "CUST_ID");

interface IndexRow {
  name: string;
  columns: string[];
  valid: boolean;
}

/** The table's indexes with their columns in order and whether they are valid. */
async function indexesOf(db: Pick<DatabaseHandle, "query">, table: string): Promise<Map<string, IndexRow>> {
  const res = await db.query<{ name: string; columns: string; valid: boolean }>(
    `SELECT ic.relname AS name, i.indisvalid AS valid,
            string_agg(a.attname, ',' ORDER BY k.ord) AS columns
       FROM pg_index i
       JOIN pg_class ic ON ic.oid = i.indexrelid
       JOIN pg_class t ON t.oid = i.indrelid
       JOIN pg_namespace n ON n.oid = t.relnamespace
       JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord) ON true
       JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum
      WHERE n.nspname = current_schema() AND t.relname = $1
      GROUP BY ic.relname, i.indisvalid`,
    [table],
  );
  return new Map(
    res.rows.map((r) => [r.name, { name: r.name, columns: r.columns.split(","), valid: r.valid }]),
  );
}

describe("composite index names", () => {
  it("are the table's prefix, the columns and a hash of the exact list, within 63 bytes", () => {
    expect(cityName).toMatch(/^TB_ANAG_CUST00__cx_CITY_ID_NAME_CUST_ID_[0-9a-f]{8}_idx$/);
    expect(cityName.startsWith(compositeIndexPrefix(TABLE))).toBe(true);
    expect(compositeIndexName(TABLE, ["CITY_ID", "NAME"], "CUST_ID")).toBe(cityName);
    // Lists that read alike once joined get different names.
    expect(compositeIndexName("T", ["A_B", "C"], "ID")).not.toBe(compositeIndexName("T", ["A", "B_C"], "ID"));
    const long = "T".repeat(60);
    const fields = ["F".repeat(60), "G".repeat(60), "H".repeat(60), "I".repeat(60), "J".repeat(60)];
    const name = compositeIndexName(long, fields, "ID_".repeat(20));
    expect(Buffer.byteLength(name)).toBeLessThanOrEqual(63);
    expect(name.startsWith(compositeIndexPrefix(long))).toBe(true);
    expect(compositeIndexName(long, [...fields].reverse(), "ID_".repeat(20))).not.toBe(name);
    // A field's index never starts like a composite one (codes start with a letter).
    expect(fieldIndexName(TABLE, "cx_NAME", "CUST_ID").startsWith(compositeIndexPrefix(TABLE))).toBe(false);
  });

  it("INDEXES parses into indexes separated by semicolons, fields by commas", () => {
    expect(parseCompositeIndexes(" CITY_ID, NAME ;VIP,CREDIT_LIMIT; ")).toEqual([
      ["CITY_ID", "NAME"],
      ["VIP", "CREDIT_LIMIT"],
    ]);
    expect(parseCompositeIndexes(null)).toEqual([]);
  });
});

describe.each(BACKENDS)("TB_DIM.INDEXES through metadata writes (%s)", (backend) => {
  let t: TestApp;
  let anna: Client;

  beforeAll(async () => {
    t = await createTestApp(backend, { fixture: "sample", env: NO_RATE_LIMITS });
    anna = await clientFor(t.app, "anna");
  });
  afterAll(async () => {
    await t?.close();
  });

  const setIndexes = (INDEXES: string | null) =>
    anna.patch("/api/v4/core/DIM/CUST?source=erp", { data: { INDEXES } });

  it("declaring INDEXES builds each index on (TENANT_ID, fields…, id); the write answers the value", async () => {
    const res = await setIndexes("CITY_ID,NAME;VIP,CREDIT_LIMIT");
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(JSON.stringify(res.body)).toContain('"INDEXES":"CITY_ID,NAME;VIP,CREDIT_LIMIT"');
    const ix = await indexesOf(t.services.db, TABLE);
    expect(ix.get(cityName)).toEqual({
      name: cityName,
      columns: ["TENANT_ID", "CITY_ID", "NAME", "CUST_ID"],
      valid: true,
    });
    expect(ix.get(vipCredit)).toEqual({
      name: vipCredit,
      columns: ["TENANT_ID", "VIP", "CREDIT_LIMIT", "CUST_ID"],
      valid: true,
    });
    const stored = await t.services.db.query(`SELECT "INDEXES" FROM "TB_DIM" WHERE "COD_DIM" = 'CUST'`);
    expect(stored.rows).toEqual([{ INDEXES: "CITY_ID,NAME;VIP,CREDIT_LIMIT" }]);
    expect(t.services.metadata.current().dimensions.get("CUST")?.compositeIndexes).toEqual([
      ["CITY_ID", "NAME"],
      ["VIP", "CREDIT_LIMIT"],
    ]);
  });

  it("a list filtered by CITY_ID and sorted by NAME reads the composite index after a burst of rows sorting first", async () => {
    // 20,000 rows in other cities whose names sort before every MI customer's.
    await t.services.db.query(
      `INSERT INTO "${TABLE}" ("TENANT_ID", "CODE", "NAME", "CITY_ID")
       SELECT 'acme', 'B' || g, 'A' || lpad(g::text, 6, '0'), CASE WHEN g % 2 = 0 THEN 'RM' ELSE 'TO' END
         FROM generate_series(1, 20000) g`,
    );
    await t.services.db.query(`ANALYZE "${TABLE}"`);
    const res = await anna.get(
      "/api/v4/core/CUST?source=anag-1&filter[CITY_ID]=MI&sort=NAME&$num_rows=2&$count=none&debug=true",
    );
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect((res.body.data as Array<{ NAME: string }>).map((r) => r.NAME)).toEqual([
      "Neri Trasporti",
      "Rossi Srl",
    ]);
    const { sql, params } = res.body.debug as { sql: string; params: unknown[] };
    const explain = async () => {
      const plan = await t.services.db.query<{ "QUERY PLAN": string }>(`EXPLAIN ${sql}`, params);
      return plan.rows.map((r) => r["QUERY PLAN"]).join("\n");
    };
    const plan = await explain();
    expect(plan).toContain(cityName);
    expect(plan).not.toMatch(/Sort/);
  });

  it("an index no longer declared is dropped; the others and the field indexes stay", async () => {
    const res = await setIndexes("VIP,CREDIT_LIMIT");
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const ix = await indexesOf(t.services.db, TABLE);
    expect(ix.has(cityName)).toBe(false);
    expect(ix.get(vipCredit)?.valid).toBe(true);
    expect(ix.has(fieldIndexName(TABLE, "NAME", "CUST_ID"))).toBe(true);
    expect(ix.has(fieldIndexName(TABLE, "CITY_ID", "CUST_ID"))).toBe(true);
  });

  it("an index left invalid (a failed concurrent build) is built again by the next sync", async () => {
    await t.services.db.query(
      `UPDATE pg_index SET indisvalid = false WHERE indexrelid = (SELECT oid FROM pg_class WHERE relname = $1)`,
      [vipCredit],
    );
    expect((await indexesOf(t.services.db, TABLE)).get(vipCredit)?.valid).toBe(false);
    const res = await anna.patch("/api/v4/core/DIM/CUST?source=erp", {
      data: { DESC_DIM: "Customers (re)" },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect((await indexesOf(t.services.db, TABLE)).get(vipCredit)).toEqual({
      name: vipCredit,
      columns: ["TENANT_ID", "VIP", "CREDIT_LIMIT", "CUST_ID"],
      valid: true,
    });
  });

  it.each([
    ["CITY_ID,NOPE", "names NOPE, which is not a field of CUST"],
    ["CITY_ID,NAME,CITY_ID", "names CITY_ID twice"],
    ["CITY_ID,NAME,EMAIL,VIP,CREDIT_LIMIT,RISK_SCORE", "names 6 fields; at most 5"],
    ["CITY_ID,NOTES", "names NOTES, a TEXT field, which cannot be indexed"],
    ["CITY_ID", "names one field"],
    ["CITY_ID,CUST_ID", "names the id field CUST_ID"],
    ["CITY_ID,,NAME", "has an empty field name"],
    ["CITY_ID,NAME;CITY_ID,NAME", "is declared twice"],
  ])("INDEXES %s is refused with 400 naming the problem, and nothing changes", async (value, message) => {
    const before = await indexesOf(t.services.db, TABLE);
    const res = await setIndexes(value);
    expect(res.status).toBe(400);
    expect(res.body.code).toBe("INVALID_METADATA");
    const errors = res.body.errors as Array<{ field: string; message: string }>;
    expect(errors.some((e) => /^TB_DIM\[\d+\]\.INDEXES$/.test(e.field) && e.message.includes(message))).toBe(
      true,
    );
    const stored = await t.services.db.query(`SELECT "INDEXES" FROM "TB_DIM" WHERE "COD_DIM" = 'CUST'`);
    expect(stored.rows).toEqual([{ INDEXES: "VIP,CREDIT_LIMIT" }]);
    expect([...(await indexesOf(t.services.db, TABLE)).keys()].sort()).toEqual([...before.keys()].sort());
  });

  if (backend === "postgres") {
    it("on PostgreSQL an index is built and dropped CONCURRENTLY, after the metadata write's commit", async () => {
      const name = compositeIndexName(TABLE, ["CITY_ID", "EMAIL"], "CUST_ID");
      // Built on a connection of their own (DatabaseHandle.maintenance, INDEX_BUILD_TIMEOUT_MS).
      const spy = vi.spyOn(t.services.db, "maintenance");
      try {
        expect((await setIndexes("VIP,CREDIT_LIMIT;CITY_ID,EMAIL")).status).toBe(200);
        expect((await setIndexes("VIP,CREDIT_LIMIT")).status).toBe(200);
        const sent = spy.mock.calls.map((c) => String(c[0])).filter((q) => q.includes(name));
        expect(sent).toEqual([
          `CREATE INDEX CONCURRENTLY IF NOT EXISTS "${name}" ON "${TABLE}" ("TENANT_ID", "CITY_ID", "EMAIL", "CUST_ID")`,
          `DROP INDEX CONCURRENTLY IF EXISTS "${name}"`,
        ]);
      } finally {
        spy.mockRestore();
      }
      expect((await indexesOf(t.services.db, TABLE)).has(name)).toBe(false);
    });
  }

  it("clearing INDEXES drops every composite index", async () => {
    const res = await setIndexes(null);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const names = [...(await indexesOf(t.services.db, TABLE)).keys()];
    expect(names.filter((n) => n.startsWith(compositeIndexPrefix(TABLE)))).toEqual([]);
    expect(names).toContain(fieldIndexName(TABLE, "NAME", "CUST_ID"));
  });
});

describe.each(BACKENDS)("TB_DIM.INDEXES in the sync's own transaction (%s)", (backend) => {
  let db: DatabaseHandle;
  beforeAll(async () => {
    db = await createTestDatabase(backend);
    await migrate(db);
  });
  afterAll(async () => {
    await db?.close();
  });

  function dimension(INDEXES: string | null, tableName = "TB_CX00"): DimensionDef {
    const rows: MetadataRows = {
      TB_DIM: [{ COD_DIM: "CX", TABLE_NAME: tableName, ID_FIELD: "CX_ID", INDEXES }],
      TB_VAR: [
        { COD_DIM: "CX", NUM_VAR: 1, COD_VAR: "CX_ID", DATA_TYPE: "INTEGER", NULLABLE: false },
        { COD_DIM: "CX", NUM_VAR: 2, COD_VAR: "A", DATA_TYPE: "STRING" },
        { COD_DIM: "CX", NUM_VAR: 3, COD_VAR: "B", DATA_TYPE: "INTEGER" },
      ],
      TB_COST: [],
      TB_OBJECT: [],
      TB_MENU: [],
      TB_SORT: [],
      TB_DOCUMENT: [],
    };
    return buildModel(rows, 1).dimensions.get("CX") as DimensionDef;
  }

  it("a new table gets its declared indexes; a change adds and drops them; a renamed table's go with it", async () => {
    const ab = (table: string) => compositeIndexName(table, ["A", "B"], "CX_ID");
    const ba = (table: string) => compositeIndexName(table, ["B", "A"], "CX_ID");
    const first = dimension("A,B");
    await db.transaction((tx) => syncTables(tx, [first]));
    expect((await indexesOf(db, "TB_CX00")).get(ab("TB_CX00"))?.columns).toEqual([
      "TENANT_ID",
      "A",
      "B",
      "CX_ID",
    ]);

    const second = dimension("B,A;A,B");
    await db.transaction((tx) => syncTables(tx, [second], new Map([["CX", first]])));
    const both = await indexesOf(db, "TB_CX00");
    expect(both.get(ba("TB_CX00"))?.columns).toEqual(["TENANT_ID", "B", "A", "CX_ID"]);
    expect(both.has(ab("TB_CX00"))).toBe(true);

    // An index made by hand under another name is left alone.
    await db.query(`CREATE INDEX "TB_CX00_by_hand" ON "TB_CX00" ("B")`);
    const third = dimension("B,A");
    await db.transaction((tx) => syncTables(tx, [third], new Map([["CX", second]])));
    const one = await indexesOf(db, "TB_CX00");
    expect(one.has(ab("TB_CX00"))).toBe(false);
    expect(one.has(ba("TB_CX00"))).toBe(true);
    expect(one.has("TB_CX00_by_hand")).toBe(true);

    // The empty table moves to another TABLE_NAME: its composite index is made under the new name.
    const moved = dimension("B,A", "TB_CX01");
    await db.transaction((tx) => syncTables(tx, [moved], new Map([["CX", third]])));
    const after = [...(await indexesOf(db, "TB_CX01")).keys()];
    expect(after).toContain(ba("TB_CX01"));
    expect(after.filter((n) => n.startsWith(compositeIndexPrefix("TB_CX00")))).toEqual([]);
  });
});

describe.each(BACKENDS)("TB_DIM.INDEXES in a fixture (%s)", (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp(backend, { fixture: "demo", env: NO_RATE_LIMITS });
  });
  afterAll(async () => {
    await t?.close();
  });

  it("importing the demo fixture builds ITEM's declared index (SUPP_ID,NAME)", async () => {
    const name = compositeIndexName("TB_ANAG_ITEM00", ["SUPP_ID", "NAME"], "ITEM_ID");
    expect((await indexesOf(t.services.db, "TB_ANAG_ITEM00")).get(name)).toEqual({
      name,
      columns: ["TENANT_ID", "SUPP_ID", "NAME", "ITEM_ID"],
      valid: true,
    });
  });
});
