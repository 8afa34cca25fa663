// DDL sync (src/ddl/sync.ts): dimension tables follow the metadata; changes that would lose data
// are refused with 409 UNSAFE_SCHEMA_CHANGE and nothing is applied.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DatabaseHandle } from "../../src/db/database.ts";
import { migrate } from "../../src/db/migrate.ts";
import { indexBuildSql, syncTables } from "../../src/ddl/sync.ts";
import { UnsafeSchemaChangeError } from "../../src/errors.ts";
import { mapError } from "../../src/http/error-handler.ts";
import { buildModel } from "../../src/metadata/build.ts";
import type { DimensionDef, MetadataRows } from "../../src/types.ts";
import { BACKENDS, createTestDatabase } from "../helpers/env.ts";

type VarRow = MetadataRows["TB_VAR"][number];
type DimRow = MetadataRows["TB_DIM"][number];

function dimension(d: DimRow, vars: Array<Omit<VarRow, "COD_DIM">>, extra: Partial<MetadataRows> = {}) {
  const rows: MetadataRows = {
    TB_DIM: [d, ...(extra.TB_DIM ?? [])],
    TB_VAR: [...vars.map((v) => ({ ...v, COD_DIM: d.COD_DIM })), ...(extra.TB_VAR ?? [])],
    TB_COST: [],
    TB_OBJECT: extra.TB_OBJECT ?? [],
    TB_MENU: [],
    TB_SORT: [],
    TB_DOCUMENT: [],
  };
  return buildModel(rows, 1).dimensions.get(d.COD_DIM) as DimensionDef;
}

interface Col {
  column_name: string;
  data_type: string;
  character_maximum_length: number | null;
  numeric_precision: number | null;
  numeric_scale: number | null;
  is_nullable: string;
  is_identity: string;
}

async function columns(db: DatabaseHandle, table: string): Promise<Map<string, Col>> {
  const res = await db.query<Col>(
    `SELECT column_name, data_type, character_maximum_length, numeric_precision, numeric_scale, is_nullable, is_identity
       FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1
      ORDER BY ordinal_position`,
    [table],
  );
  return new Map(res.rows.map((r) => [r.column_name, r]));
}

async function primaryKey(db: DatabaseHandle, table: string): Promise<string[]> {
  const res = await db.query<{ column_name: string }>(
    `SELECT a.attname AS column_name
       FROM pg_index i
       JOIN pg_class c ON c.oid = i.indrelid
       JOIN pg_namespace n ON n.oid = c.relnamespace
       JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord) ON true
       JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum
      WHERE i.indisprimary AND c.relname = $1 AND n.nspname = current_schema()
      ORDER BY k.ord`,
    [table],
  );
  return res.rows.map((r) => r.column_name);
}

async function indexes(db: DatabaseHandle, table: string): Promise<string[]> {
  const res = await db.query<{ indexdef: string }>(
    `SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() AND tablename = $1`,
    [table],
  );
  return res.rows.map((r) => r.indexdef);
}

async function sync(db: DatabaseHandle, ...dims: DimensionDef[]) {
  return db.transaction((tx) => syncTables(tx, dims));
}

/** Syncs `dim` as a change from `before` (the previous metadata of the same dimension). */
async function syncFrom(db: DatabaseHandle, before: DimensionDef, dim: DimensionDef) {
  return db.transaction((tx) => syncTables(tx, [dim], new Map([[before.code, before]])));
}

async function refusalFrom(db: DatabaseHandle, before: DimensionDef, dim: DimensionDef) {
  try {
    await syncFrom(db, before, dim);
  } catch (err) {
    expect(err).toBeInstanceOf(UnsafeSchemaChangeError);
    return err as UnsafeSchemaChangeError;
  }
  throw new Error("syncTables accepted an unsafe change");
}

async function refusal(db: DatabaseHandle, ...dims: DimensionDef[]): Promise<UnsafeSchemaChangeError> {
  try {
    await sync(db, ...dims);
  } catch (err) {
    expect(err).toBeInstanceOf(UnsafeSchemaChangeError);
    return err as UnsafeSchemaChangeError;
  }
  throw new Error("syncTables accepted an unsafe change");
}

const ID: Omit<VarRow, "COD_DIM"> = { NUM_VAR: 1, COD_VAR: "ITEM_ID", DATA_TYPE: "INTEGER", NULLABLE: false };
const ITEM = { COD_DIM: "ITEM", TABLE_NAME: "TB_ITEM00", ID_FIELD: "ITEM_ID" };

describe.each(BACKENDS)("syncTables on %s", (backend) => {
  let db: DatabaseHandle;
  beforeAll(async () => {
    db = await createTestDatabase(backend);
    await migrate(db);
  });
  afterAll(async () => {
    await db?.close();
  });

  it("creates a table with the right columns, types, nullability, primary key and indexes", async () => {
    const owner = dimension({ COD_DIM: "OWN", TABLE_NAME: "TB_OWN00", ID_FIELD: "OWN_ID" }, [
      { NUM_VAR: 1, COD_VAR: "OWN_ID", DATA_TYPE: "STRING", LENGTH: 12 },
    ]);
    const full = dimension(
      { COD_DIM: "FULL", TABLE_NAME: "TB_FULL00", ID_FIELD: "FULL_ID" },
      [
        { NUM_VAR: 1, COD_VAR: "FULL_ID", DATA_TYPE: "INTEGER", NULLABLE: true },
        { NUM_VAR: 2, COD_VAR: "NAME", DATA_TYPE: "STRING", LENGTH: 40, NULLABLE: false },
        { NUM_VAR: 3, COD_VAR: "NOTES", DATA_TYPE: "TEXT" },
        { NUM_VAR: 4, COD_VAR: "QTY", DATA_TYPE: "INTEGER", LENGTH: 6 },
        { NUM_VAR: 5, COD_VAR: "PRICE", DATA_TYPE: "DECIMAL", LENGTH: 12, DECIMALS: 3 },
        { NUM_VAR: 6, COD_VAR: "FLAG", DATA_TYPE: "BOOLEAN" },
        { NUM_VAR: 7, COD_VAR: "DAY", DATA_TYPE: "DATE" },
        { NUM_VAR: 8, COD_VAR: "AT", DATA_TYPE: "TIMESTAMP" },
        { NUM_VAR: 9, COD_VAR: "DOC", DATA_TYPE: "JSON" },
        { NUM_VAR: 10, COD_VAR: "PIC", DATA_TYPE: "MEDIA" },
        {
          NUM_VAR: 11,
          COD_VAR: "OWN_ID",
          DATA_TYPE: "STRING",
          LENGTH: 12,
          TIPO_CAMPO: "AC",
          TIPO_VAR: "OWN",
        },
        { NUM_VAR: 12, COD_VAR: "ANY_STR", DATA_TYPE: "VARCHAR" },
        { NUM_VAR: 13, COD_VAR: "DEC_DEFAULT", DATA_TYPE: "NUMERIC" },
      ],
      {
        TB_DIM: [{ COD_DIM: "OWN", TABLE_NAME: "TB_OWN00", ID_FIELD: "OWN_ID" }],
        TB_VAR: [{ COD_DIM: "OWN", NUM_VAR: 1, COD_VAR: "OWN_ID", DATA_TYPE: "STRING", LENGTH: 12 }],
      },
    );
    const result = await sync(db, owner, full);
    expect(result.created).toEqual(["TB_OWN00", "TB_FULL00"]);
    expect(result.altered).toEqual([]);

    const cols = await columns(db, "TB_FULL00");
    const shape = (name: string) => {
      const c = cols.get(name);
      if (!c) throw new Error(`no column ${name}`);
      return [c.data_type, c.character_maximum_length ?? c.numeric_precision, c.numeric_scale, c.is_nullable];
    };
    expect([...cols.keys()]).toEqual([
      "FULL_ID",
      "NAME",
      "NOTES",
      "QTY",
      "PRICE",
      "FLAG",
      "DAY",
      "AT",
      "DOC",
      "PIC",
      "OWN_ID",
      "ANY_STR",
      "DEC_DEFAULT",
      "TREC",
      "CDATA",
      "OWNER",
      "LDATA",
      "LOWNER",
      "TENANT_ID",
    ]);
    expect(shape("FULL_ID")).toEqual(["bigint", 64, 0, "NO"]);
    expect(cols.get("FULL_ID")!.is_identity).toBe("YES");
    expect(shape("NAME")).toEqual(["character varying", 40, null, "NO"]);
    expect(shape("NOTES")).toEqual(["text", null, null, "YES"]);
    expect(shape("QTY")).toEqual(["bigint", 64, 0, "YES"]);
    expect(cols.get("QTY")!.is_identity).toBe("NO");
    expect(shape("PRICE")).toEqual(["numeric", 12, 3, "YES"]);
    expect(shape("FLAG")).toEqual(["boolean", null, null, "YES"]);
    expect(shape("DAY")).toEqual(["character varying", 8, null, "YES"]);
    expect(shape("AT")).toEqual(["character varying", 14, null, "YES"]);
    expect(shape("DOC")).toEqual(["jsonb", null, null, "YES"]);
    expect(shape("PIC")).toEqual(["jsonb", null, null, "YES"]);
    expect(shape("ANY_STR")).toEqual(["character varying", 255, null, "YES"]);
    expect(shape("DEC_DEFAULT")).toEqual(["numeric", 18, 2, "YES"]);
    expect(shape("TREC")).toEqual(["character varying", 1, null, "NO"]);
    expect(shape("CDATA")).toEqual(["character varying", 14, null, "YES"]);
    expect(shape("OWNER")).toEqual(["character varying", 100, null, "YES"]);
    expect(shape("TENANT_ID")).toEqual(["character varying", 50, null, "NO"]);

    expect(await primaryKey(db, "TB_FULL00")).toEqual(["TENANT_ID", "FULL_ID"]);
    expect(await primaryKey(db, "TB_OWN00")).toEqual(["TENANT_ID", "OWN_ID"]);
    const ix = await indexes(db, "TB_FULL00");
    expect(ix.some((d) => /\("TENANT_ID", "OWN_ID", "FULL_ID"\)/.test(d) && !/UNIQUE/.test(d))).toBe(true);

    // The table works: TREC defaults to N, the id is generated, (TENANT_ID, id) is unique per tenant.
    const ins = await db.query<{ FULL_ID: number; TREC: string }>(
      `INSERT INTO "TB_FULL00" ("NAME", "TENANT_ID") VALUES ('a', 't1'), ('b', 't1') RETURNING "FULL_ID", "TREC"`,
    );
    expect(ins.rows).toEqual([
      { FULL_ID: 1, TREC: "N" },
      { FULL_ID: 2, TREC: "N" },
    ]);
    await db.query(`INSERT INTO "TB_OWN00" ("OWN_ID", "TENANT_ID") VALUES ('x', 't1'), ('x', 't2')`);
    await expect(
      db.query(`INSERT INTO "TB_OWN00" ("OWN_ID", "TENANT_ID") VALUES ('x', 't1')`),
    ).rejects.toThrow();

    // In sync: a second run changes nothing.
    const again = await sync(db, owner, full);
    expect(again).toEqual({ created: [], altered: [], statements: [] });
  });

  it("AUDIT_STYLE CREATED tables carry TREC and the CREATED_*/UPDATED_*/DELETED_* columns", async () => {
    const d = dimension(
      { ...ITEM, COD_DIM: "AUD", TABLE_NAME: "TB_AUD00", ID_FIELD: "A_ID", AUDIT_STYLE: "CREATED" },
      [{ NUM_VAR: 1, COD_VAR: "A_ID", DATA_TYPE: "INTEGER" }],
    );
    await sync(db, d);
    expect([...(await columns(db, "TB_AUD00")).keys()]).toEqual([
      "A_ID",
      "TREC",
      "CREATED_BY",
      "CREATED_AT",
      "UPDATED_BY",
      "UPDATED_AT",
      "DELETED_BY",
      "DELETED_AT",
      "TENANT_ID",
    ]);
  });

  describe("altering a table that holds rows", () => {
    const v1 = dimension(ITEM, [ID, { NUM_VAR: 2, COD_VAR: "CODE", DATA_TYPE: "STRING", LENGTH: 10 }]);
    beforeAll(async () => {
      await sync(db, v1);
      await db.query(`INSERT INTO "TB_ITEM00" ("CODE", "TENANT_ID") VALUES ('abcdefgh', 't1'), ('ab', 't1')`);
    });

    it("adding a TB_VAR row adds the column (nullable, to a table with rows)", async () => {
      const v2 = dimension(ITEM, [
        ID,
        { NUM_VAR: 2, COD_VAR: "CODE", DATA_TYPE: "STRING", LENGTH: 10 },
        { NUM_VAR: 3, COD_VAR: "EXTRA", DATA_TYPE: "STRING", LENGTH: 5 },
        { NUM_VAR: 4, COD_VAR: "EMPTY_NUM", DATA_TYPE: "INTEGER" },
        { NUM_VAR: 5, COD_VAR: "EMPTY_STR", DATA_TYPE: "STRING", LENGTH: 20 },
      ]);
      const result = await sync(db, v2);
      expect(result.altered).toEqual(["TB_ITEM00"]);
      expect(result.statements).toEqual([
        `ALTER TABLE "TB_ITEM00" ADD COLUMN "EXTRA" VARCHAR(5)`,
        `ALTER TABLE "TB_ITEM00" ADD COLUMN "EMPTY_NUM" BIGINT`,
        `ALTER TABLE "TB_ITEM00" ADD COLUMN "EMPTY_STR" VARCHAR(20)`,
      ]);
      const cols = await columns(db, "TB_ITEM00");
      expect(cols.get("EXTRA")).toMatchObject({
        data_type: "character varying",
        character_maximum_length: 5,
      });
      await db.query(`UPDATE "TB_ITEM00" SET "EXTRA" = 'xyz'`);
    });

    it("adding a NOT NULL column to a table with rows is refused", async () => {
      const d = dimension(ITEM, [
        ID,
        { NUM_VAR: 2, COD_VAR: "CODE", DATA_TYPE: "STRING", LENGTH: 10 },
        { NUM_VAR: 3, COD_VAR: "EXTRA", DATA_TYPE: "STRING", LENGTH: 5 },
        { NUM_VAR: 4, COD_VAR: "EMPTY_NUM", DATA_TYPE: "INTEGER" },
        { NUM_VAR: 5, COD_VAR: "EMPTY_STR", DATA_TYPE: "STRING", LENGTH: 20 },
        { NUM_VAR: 6, COD_VAR: "MUST", DATA_TYPE: "STRING", NULLABLE: false },
      ]);
      const err = await refusal(db, d);
      expect(err.errors).toEqual([{ field: "ITEM.MUST", message: expect.stringContaining("NOT NULL") }]);
      expect((await columns(db, "TB_ITEM00")).has("MUST")).toBe(false);
    });

    const current = (code: Omit<VarRow, "COD_DIM">, rest: Array<Omit<VarRow, "COD_DIM">> = []) =>
      dimension(ITEM, [
        ID,
        code,
        { NUM_VAR: 3, COD_VAR: "EXTRA", DATA_TYPE: "STRING", LENGTH: 5 },
        { NUM_VAR: 4, COD_VAR: "EMPTY_NUM", DATA_TYPE: "INTEGER" },
        { NUM_VAR: 5, COD_VAR: "EMPTY_STR", DATA_TYPE: "STRING", LENGTH: 20 },
        ...rest,
      ]);

    it("widening a STRING works and keeps the values", async () => {
      const result = await sync(
        db,
        current({ NUM_VAR: 2, COD_VAR: "CODE", DATA_TYPE: "STRING", LENGTH: 30 }),
      );
      expect(result.statements).toEqual([`ALTER TABLE "TB_ITEM00" ALTER COLUMN "CODE" TYPE VARCHAR(30)`]);
      expect((await columns(db, "TB_ITEM00")).get("CODE")!.character_maximum_length).toBe(30);
      const rows = await db.query<{ CODE: string }>(`SELECT "CODE" FROM "TB_ITEM00" ORDER BY "ITEM_ID"`);
      expect(rows.rows.map((r) => r.CODE)).toEqual(["abcdefgh", "ab"]);
    });

    it("a STRING becoming TEXT keeps its values (a widening, not a loss)", async () => {
      const result = await sync(db, current({ NUM_VAR: 2, COD_VAR: "CODE", DATA_TYPE: "TEXT" }));
      expect(result.statements).toEqual([`ALTER TABLE "TB_ITEM00" ALTER COLUMN "CODE" TYPE TEXT`]);
      expect((await columns(db, "TB_ITEM00")).get("CODE")!.data_type).toBe("text");
      const rows = await db.query<{ CODE: string }>(`SELECT "CODE" FROM "TB_ITEM00" ORDER BY "ITEM_ID"`);
      expect(rows.rows.map((r) => r.CODE)).toEqual(["abcdefgh", "ab"]);
      // And back: a narrowing like a STRING's, refused below the longest value, done within it.
      const cut = await refusal(db, current({ NUM_VAR: 2, COD_VAR: "CODE", DATA_TYPE: "STRING", LENGTH: 4 }));
      expect(cut.errors).toEqual([
        { field: "ITEM.CODE", message: "narrowing CODE to 4 characters would cut values of up to 8" },
      ]);
      await sync(db, current({ NUM_VAR: 2, COD_VAR: "CODE", DATA_TYPE: "STRING", LENGTH: 30 }));
      expect((await columns(db, "TB_ITEM00")).get("CODE")!.character_maximum_length).toBe(30);
    });

    it("narrowing a STRING below a stored value is refused, listing the column; nothing is applied", async () => {
      // Together with a safe change (a new column) that must not be applied either.
      const d = current({ NUM_VAR: 2, COD_VAR: "CODE", DATA_TYPE: "STRING", LENGTH: 4 }, [
        { NUM_VAR: 9, COD_VAR: "LATER", DATA_TYPE: "STRING", LENGTH: 5 },
      ]);
      const err = await refusal(db, d);
      expect(err.status).toBe(409);
      expect(err.code).toBe("UNSAFE_SCHEMA_CHANGE");
      expect(err.errors).toEqual([
        { field: "ITEM.CODE", message: "narrowing CODE to 4 characters would cut values of up to 8" },
      ]);
      const cols = await columns(db, "TB_ITEM00");
      expect(cols.get("CODE")!.character_maximum_length).toBe(30);
      expect(cols.has("LATER")).toBe(false);

      // Over HTTP it is the standard error body.
      const mapped = mapError(err);
      expect(mapped.status).toBe(409);
      expect(mapped.body).toEqual({
        error: "Conflict",
        message: "The metadata change would lose data; nothing was applied.",
        code: "UNSAFE_SCHEMA_CHANGE",
        status: 409,
        errors: [{ field: "ITEM.CODE", message: expect.stringContaining("narrowing CODE") }],
      });
    });

    it("problems of several tables are listed together and none of them is changed", async () => {
      const other = dimension({ COD_DIM: "OTH", TABLE_NAME: "TB_OTH00", ID_FIELD: "O_ID" }, [
        { NUM_VAR: 1, COD_VAR: "O_ID", DATA_TYPE: "INTEGER" },
        { NUM_VAR: 2, COD_VAR: "V", DATA_TYPE: "STRING", LENGTH: 10 },
      ]);
      await sync(db, other);
      await db.query(`INSERT INTO "TB_OTH00" ("V", "TENANT_ID") VALUES ('0123456789', 't1')`);
      const otherNarrow = dimension({ COD_DIM: "OTH", TABLE_NAME: "TB_OTH00", ID_FIELD: "O_ID" }, [
        { NUM_VAR: 1, COD_VAR: "O_ID", DATA_TYPE: "INTEGER" },
        { NUM_VAR: 2, COD_VAR: "V", DATA_TYPE: "STRING", LENGTH: 2 },
        { NUM_VAR: 3, COD_VAR: "NEW_ONE", DATA_TYPE: "TEXT" },
      ]);
      const err = await refusal(
        db,
        otherNarrow,
        current({ NUM_VAR: 2, COD_VAR: "CODE", DATA_TYPE: "STRING", LENGTH: 3 }),
      );
      expect(err.errors!.map((e) => e.field).sort()).toEqual(["ITEM.CODE", "OTH.V"]);
      expect((await columns(db, "TB_OTH00")).has("NEW_ONE")).toBe(false);
    });

    it("narrowing a STRING when every value fits works", async () => {
      await sync(db, current({ NUM_VAR: 2, COD_VAR: "CODE", DATA_TYPE: "STRING", LENGTH: 8 }));
      expect((await columns(db, "TB_ITEM00")).get("CODE")!.character_maximum_length).toBe(8);
    });

    it("dropping a column that holds values is refused", async () => {
      const noExtra = dimension(ITEM, [
        ID,
        { NUM_VAR: 2, COD_VAR: "CODE", DATA_TYPE: "STRING", LENGTH: 8 },
        { NUM_VAR: 4, COD_VAR: "EMPTY_NUM", DATA_TYPE: "INTEGER" },
        { NUM_VAR: 5, COD_VAR: "EMPTY_STR", DATA_TYPE: "STRING", LENGTH: 20 },
      ]);
      const err = await refusal(db, noExtra);
      expect(err.errors).toEqual([
        { field: "ITEM.EXTRA", message: "dropping EXTRA from TB_ITEM00 would lose the values it holds" },
      ]);
      expect((await columns(db, "TB_ITEM00")).has("EXTRA")).toBe(true);
    });

    it("dropping an empty column works", async () => {
      const noEmptyStr = dimension(ITEM, [
        ID,
        { NUM_VAR: 2, COD_VAR: "CODE", DATA_TYPE: "STRING", LENGTH: 8 },
        { NUM_VAR: 3, COD_VAR: "EXTRA", DATA_TYPE: "STRING", LENGTH: 5 },
        { NUM_VAR: 4, COD_VAR: "EMPTY_NUM", DATA_TYPE: "INTEGER" },
      ]);
      const result = await sync(db, noEmptyStr);
      expect(result.statements).toEqual([`ALTER TABLE "TB_ITEM00" DROP COLUMN "EMPTY_STR"`]);
      expect((await columns(db, "TB_ITEM00")).has("EMPTY_STR")).toBe(false);
    });

    it("changing the type of an empty column works", async () => {
      const d = dimension(ITEM, [
        ID,
        { NUM_VAR: 2, COD_VAR: "CODE", DATA_TYPE: "STRING", LENGTH: 8 },
        { NUM_VAR: 3, COD_VAR: "EXTRA", DATA_TYPE: "STRING", LENGTH: 5 },
        { NUM_VAR: 4, COD_VAR: "EMPTY_NUM", DATA_TYPE: "BOOLEAN" },
      ]);
      await sync(db, d);
      expect((await columns(db, "TB_ITEM00")).get("EMPTY_NUM")!.data_type).toBe("boolean");
      await db.query(`UPDATE "TB_ITEM00" SET "EMPTY_NUM" = true WHERE "ITEM_ID" = 1`);
    });

    it("changing the type of a column holding values is refused", async () => {
      const d = dimension(ITEM, [
        ID,
        { NUM_VAR: 2, COD_VAR: "CODE", DATA_TYPE: "INTEGER" },
        { NUM_VAR: 3, COD_VAR: "EXTRA", DATA_TYPE: "STRING", LENGTH: 5 },
        { NUM_VAR: 4, COD_VAR: "EMPTY_NUM", DATA_TYPE: "BOOLEAN" },
      ]);
      const err = await refusal(db, d);
      expect(err.errors).toEqual([
        {
          field: "ITEM.CODE",
          message: "changing CODE from varchar to bigint would lose the values it holds",
        },
      ]);
      expect((await columns(db, "TB_ITEM00")).get("CODE")!.data_type).toBe("character varying");
    });

    it("narrowing a DECIMAL holding values is refused; widening works", async () => {
      const base = [
        ID,
        { NUM_VAR: 2, COD_VAR: "CODE", DATA_TYPE: "STRING", LENGTH: 8 },
        { NUM_VAR: 3, COD_VAR: "EXTRA", DATA_TYPE: "STRING", LENGTH: 5 },
        { NUM_VAR: 4, COD_VAR: "EMPTY_NUM", DATA_TYPE: "BOOLEAN" },
      ];
      await sync(
        db,
        dimension(ITEM, [...base, { NUM_VAR: 5, COD_VAR: "AMT", DATA_TYPE: "DECIMAL", LENGTH: 10 }]),
      );
      await db.query(`UPDATE "TB_ITEM00" SET "AMT" = 12345.67`);
      await sync(
        db,
        dimension(ITEM, [...base, { NUM_VAR: 5, COD_VAR: "AMT", DATA_TYPE: "DECIMAL", LENGTH: 14 }]),
      );
      expect((await columns(db, "TB_ITEM00")).get("AMT")!.numeric_precision).toBe(14);
      const err = await refusal(
        db,
        dimension(ITEM, [
          ...base,
          { NUM_VAR: 5, COD_VAR: "AMT", DATA_TYPE: "DECIMAL", LENGTH: 6, DECIMALS: 1 },
        ]),
      );
      expect(err.errors!.map((e) => e.field)).toEqual(["ITEM.AMT"]);
      const amt = await db.query<{ AMT: number }>(`SELECT "AMT" FROM "TB_ITEM00" ORDER BY "ITEM_ID" LIMIT 1`);
      expect(amt.rows[0]!.AMT).toBe(12345.67);
    });

    it("a column becoming NOT NULL while some rows have no value is refused; nullable again works", async () => {
      const base = [
        ID,
        { NUM_VAR: 2, COD_VAR: "CODE", DATA_TYPE: "STRING", LENGTH: 8 },
        { NUM_VAR: 3, COD_VAR: "EXTRA", DATA_TYPE: "STRING", LENGTH: 5 },
        { NUM_VAR: 5, COD_VAR: "AMT", DATA_TYPE: "DECIMAL", LENGTH: 14 },
      ];
      const err = await refusal(
        db,
        dimension(ITEM, [
          ...base,
          { NUM_VAR: 4, COD_VAR: "EMPTY_NUM", DATA_TYPE: "BOOLEAN", NULLABLE: false },
        ]),
      );
      expect(err.errors!.map((e) => e.field)).toEqual(["ITEM.EMPTY_NUM"]);
      await sync(db, dimension(ITEM, [...base, { NUM_VAR: 4, COD_VAR: "EMPTY_NUM", DATA_TYPE: "BOOLEAN" }]));
      // CODE holds a value in every row: it may become NOT NULL.
      await sync(
        db,
        dimension(ITEM, [
          ID,
          { NUM_VAR: 2, COD_VAR: "CODE", DATA_TYPE: "STRING", LENGTH: 8, NULLABLE: false },
          { NUM_VAR: 3, COD_VAR: "EXTRA", DATA_TYPE: "STRING", LENGTH: 5 },
          { NUM_VAR: 4, COD_VAR: "EMPTY_NUM", DATA_TYPE: "BOOLEAN" },
          { NUM_VAR: 5, COD_VAR: "AMT", DATA_TYPE: "DECIMAL", LENGTH: 14 },
        ]),
      );
      expect((await columns(db, "TB_ITEM00")).get("CODE")!.is_nullable).toBe("NO");
    });
  });

  it("an empty table whose id changes between STRING and INTEGER gets (and loses) the generated id", async () => {
    const asString = dimension({ COD_DIM: "IDC", TABLE_NAME: "TB_IDC00", ID_FIELD: "IDC_ID" }, [
      { NUM_VAR: 1, COD_VAR: "IDC_ID", DATA_TYPE: "STRING", LENGTH: 36 },
      { NUM_VAR: 2, COD_VAR: "V", DATA_TYPE: "STRING", LENGTH: 5 },
    ]);
    const asInteger = dimension({ COD_DIM: "IDC", TABLE_NAME: "TB_IDC00", ID_FIELD: "IDC_ID" }, [
      { NUM_VAR: 1, COD_VAR: "IDC_ID", DATA_TYPE: "INTEGER" },
      { NUM_VAR: 2, COD_VAR: "V", DATA_TYPE: "STRING", LENGTH: 5 },
    ]);
    await sync(db, asString);
    await sync(db, asInteger);
    const cols = await columns(db, "TB_IDC00");
    expect(cols.get("IDC_ID")).toMatchObject({ data_type: "bigint", is_identity: "YES", is_nullable: "NO" });
    const ins = await db.query<{ IDC_ID: number }>(
      `INSERT INTO "TB_IDC00" ("V", "TENANT_ID") VALUES ('a', 't') RETURNING "IDC_ID"`,
    );
    expect(ins.rows).toEqual([{ IDC_ID: 1 }]);
    expect(await sync(db, asInteger)).toEqual({ created: [], altered: [], statements: [] });
    await db.query(`DELETE FROM "TB_IDC00"`);
    await sync(db, asString);
    expect((await columns(db, "TB_IDC00")).get("IDC_ID")).toMatchObject({
      data_type: "character varying",
      is_identity: "NO",
    });
    expect(await sync(db, asString)).toEqual({ created: [], altered: [], statements: [] });
  });

  it("moving the id field of an empty table moves the primary key and the identity; with rows it is refused", async () => {
    const KEY = { COD_DIM: "KEY", TABLE_NAME: "TB_KEY00" };
    const fields = [
      { NUM_VAR: 1, COD_VAR: "A_ID", DATA_TYPE: "INTEGER" },
      { NUM_VAR: 2, COD_VAR: "B_ID", DATA_TYPE: "INTEGER" },
      { NUM_VAR: 3, COD_VAR: "CODE", DATA_TYPE: "STRING", LENGTH: 10 },
    ];
    const byA = dimension({ ...KEY, ID_FIELD: "A_ID" }, fields);
    const byB = dimension({ ...KEY, ID_FIELD: "B_ID" }, fields);
    const byCode = dimension({ ...KEY, ID_FIELD: "CODE" }, fields);
    await sync(db, byA);
    const moved = await syncFrom(db, byA, byB);
    expect(moved.statements[0]).toBe(`ALTER TABLE "TB_KEY00" DROP CONSTRAINT "TB_KEY00_pk"`);
    expect(moved.statements.at(-1)).toBe(
      `ALTER TABLE "TB_KEY00" ADD CONSTRAINT "TB_KEY00_pk" PRIMARY KEY ("TENANT_ID", "B_ID")`,
    );
    expect(await primaryKey(db, "TB_KEY00")).toEqual(["TENANT_ID", "B_ID"]);
    const cols = await columns(db, "TB_KEY00");
    expect(cols.get("A_ID")).toMatchObject({ is_identity: "NO", is_nullable: "YES" });
    expect(cols.get("B_ID")).toMatchObject({ is_identity: "YES", is_nullable: "NO" });
    expect(await syncFrom(db, byB, byB)).toEqual({ created: [], altered: [], statements: [] });
    // Empty still: a STRING id takes over.
    await syncFrom(db, byB, byCode);
    expect(await primaryKey(db, "TB_KEY00")).toEqual(["TENANT_ID", "CODE"]);
    expect((await columns(db, "TB_KEY00")).get("B_ID")).toMatchObject({ is_identity: "NO" });
    await db.query(
      `INSERT INTO "TB_KEY00" ("CODE", "A_ID", "TENANT_ID") VALUES ('x', 1, 't'), ('y', 1, 't')`,
    );
    const err = await refusalFrom(db, byCode, byA);
    expect(err.errors).toContainEqual({
      field: "KEY.A_ID",
      message: expect.stringContaining("changing the id field of a table that holds rows"),
    });
    expect(await primaryKey(db, "TB_KEY00")).toEqual(["TENANT_ID", "CODE"]);
    // Without the previous metadata the key is compared all the same.
    expect((await refusal(db, byA)).errors!.map((e) => e.field)).toContain("KEY.A_ID");
  });

  it("a DATA_TYPE change within one SQL family is refused on a column holding values", async () => {
    const TYP = { COD_DIM: "TYP", TABLE_NAME: "TB_TYP00", ID_FIELD: "T_ID" };
    const v = (code: string, type: string, length?: number) => ({
      NUM_VAR: code.length,
      COD_VAR: code,
      DATA_TYPE: type,
      ...(length ? { LENGTH: length } : {}),
    });
    const id = { NUM_VAR: 0, COD_VAR: "T_ID", DATA_TYPE: "INTEGER" };
    const before = dimension(TYP, [
      id,
      v("S", "STRING", 14),
      v("DT", "DATE"),
      v("JSN", "JSON"),
      v("EMPT", "STRING", 8),
    ]);
    await sync(db, before);
    await db.query(
      `INSERT INTO "TB_TYP00" ("S", "DT", "JSN", "TENANT_ID") VALUES ('IT', '20261121', '{"a":1}', 't')`,
    );
    const after = dimension(TYP, [
      id,
      v("S", "TIMESTAMP"),
      v("DT", "TIMESTAMP"),
      v("JSN", "MEDIA"),
      v("EMPT", "DATE"),
    ]);
    const err = await refusalFrom(db, before, after);
    expect(err.errors).toEqual([
      {
        field: "TYP.S",
        message: "changing the type of S from STRING to TIMESTAMP would reinterpret the values it holds",
      },
      {
        field: "TYP.DT",
        message: "changing the type of DT from DATE to TIMESTAMP would reinterpret the values it holds",
      },
      {
        field: "TYP.JSN",
        message: "changing the type of JSN from JSON to MEDIA would reinterpret the values it holds",
      },
    ]);
    expect((await columns(db, "TB_TYP00")).get("DT")!.character_maximum_length).toBe(8);
    // The empty column alone changes type; synonyms are no change.
    const safe = dimension(TYP, [
      id,
      v("S", "varchar", 14),
      v("DT", "DATE"),
      v("JSN", "json"),
      v("EMPT", "DATE"),
    ]);
    expect((await syncFrom(db, before, safe)).statements).toEqual([]);
  });

  it("a changed TABLE_NAME renames an empty table with its key and indexes, and is refused when it holds rows", async () => {
    const owner = { COD_DIM: "OWN", TABLE_NAME: "TB_OWN00", ID_FIELD: "OWN_ID" };
    const ownerVar = { COD_DIM: "OWN", NUM_VAR: 1, COD_VAR: "OWN_ID", DATA_TYPE: "STRING", LENGTH: 12 };
    const fields = [
      { NUM_VAR: 1, COD_VAR: "R_ID", DATA_TYPE: "INTEGER" },
      { NUM_VAR: 2, COD_VAR: "OWN_ID", DATA_TYPE: "STRING", LENGTH: 12, TIPO_CAMPO: "AC", TIPO_VAR: "OWN" },
    ];
    const extra = { TB_DIM: [owner], TB_VAR: [ownerVar] };
    const v1 = dimension({ COD_DIM: "REN", TABLE_NAME: "TB_REN00", ID_FIELD: "R_ID" }, fields, extra);
    const v2 = dimension({ COD_DIM: "REN", TABLE_NAME: "TB_REN01", ID_FIELD: "R_ID" }, fields, extra);
    await sync(db, v1);
    const result = await syncFrom(db, v1, v2);
    expect(result.statements).toEqual([
      `ALTER TABLE "TB_REN00" RENAME TO "TB_REN01"`,
      `ALTER TABLE "TB_REN01" RENAME CONSTRAINT "TB_REN00_pk" TO "TB_REN01_pk"`,
      `ALTER INDEX "TB_REN00_OWN_ID_R_ID_idx" RENAME TO "TB_REN01_OWN_ID_R_ID_idx"`,
    ]);
    expect(await columns(db, "TB_REN00")).toEqual(new Map());
    expect(await primaryKey(db, "TB_REN01")).toEqual(["TENANT_ID", "R_ID"]);
    expect((await indexes(db, "TB_REN01")).some((d) => d.includes(`"TB_REN01_OWN_ID_R_ID_idx"`))).toBe(true);
    expect(await syncFrom(db, v2, v2)).toEqual({ created: [], altered: [], statements: [] });
    await db.query(`INSERT INTO "TB_REN01" ("OWN_ID", "TENANT_ID") VALUES ('o', 't')`);
    const err = await refusalFrom(db, v2, v1);
    expect(err.errors).toEqual([
      {
        field: "REN.TABLE_NAME",
        message: "changing TABLE_NAME from TB_REN01 to TB_REN00 is refused: TB_REN01 holds rows",
      },
    ]);
    expect(await columns(db, "TB_REN00")).toEqual(new Map());

    // Two empty tables swapping names in one change: refused, not a database error.
    const a1 = dimension({ COD_DIM: "SWA", TABLE_NAME: "TB_SWA00", ID_FIELD: "R_ID" }, [fields[0]!]);
    const b1 = dimension({ COD_DIM: "SWB", TABLE_NAME: "TB_SWB00", ID_FIELD: "R_ID" }, [fields[0]!]);
    const a2 = dimension({ COD_DIM: "SWA", TABLE_NAME: "TB_SWB00", ID_FIELD: "R_ID" }, [fields[0]!]);
    const b2 = dimension({ COD_DIM: "SWB", TABLE_NAME: "TB_SWA00", ID_FIELD: "R_ID" }, [fields[0]!]);
    await sync(db, a1, b1);
    const before = new Map([
      ["SWA", a1],
      ["SWB", b1],
    ]);
    await expect(db.transaction((tx) => syncTables(tx, [a2, b2], before))).rejects.toMatchObject({
      code: "UNSAFE_SCHEMA_CHANGE",
      errors: [
        { field: "SWA.TABLE_NAME", message: expect.stringContaining("one change at a time") },
        { field: "SWB.TABLE_NAME", message: expect.stringContaining("one change at a time") },
      ],
    });
  });

  it("a TABLE_NAME held by another relation (index, sequence, plain table) is refused, not a database error", async () => {
    await db.query(`CREATE TABLE "PLAIN_T" ("X" INTEGER)`);
    await db.query(`CREATE SEQUENCE "TB_CLASH00_pk"`);
    const named = (table: string) =>
      dimension({ COD_DIM: "CLASH", TABLE_NAME: table, ID_FIELD: "C_ID" }, [
        { NUM_VAR: 1, COD_VAR: "C_ID", DATA_TYPE: "INTEGER" },
      ]);
    const none = new Map<string, DimensionDef>();
    const refuse = async (table: string) => {
      try {
        await db.transaction((tx) => syncTables(tx, [named(table)], none));
      } catch (err) {
        expect(err).toBeInstanceOf(UnsafeSchemaChangeError);
        return (err as UnsafeSchemaChangeError).errors!;
      }
      throw new Error(`${table} was accepted`);
    };
    expect(await refuse("TB_ITEM00_pk")).toEqual([
      {
        field: "CLASH.TABLE_NAME",
        message: expect.stringContaining("TB_ITEM00_pk is the name of an existing index"),
      },
    ]);
    expect(await refuse("PLAIN_T")).toEqual([
      { field: "CLASH.TABLE_NAME", message: expect.stringContaining("not a dimension table") },
    ]);
    expect(await refuse("TB_CLASH00")).toEqual([
      {
        field: "CLASH.TABLE_NAME",
        message: expect.stringContaining("TB_CLASH00_pk, which an existing sequence"),
      },
    ]);
    expect(await columns(db, "TB_CLASH00")).toEqual(new Map());
    expect([...(await columns(db, "PLAIN_T")).keys()]).toEqual(["X"]);
  });

  it("identifiers are quoted: a mixed-case table and mixed-case columns work", async () => {
    const target = dimension({ COD_DIM: "Tgt", TABLE_NAME: "TbTarget", ID_FIELD: "tgtId" }, [
      { NUM_VAR: 1, COD_VAR: "tgtId", DATA_TYPE: "STRING", LENGTH: 10 },
    ]);
    const mixed = dimension(
      { COD_DIM: "Mixed", TABLE_NAME: "Tb_MixedCase", ID_FIELD: "mixedId" },
      [
        { NUM_VAR: 1, COD_VAR: "mixedId", DATA_TYPE: "INTEGER" },
        { NUM_VAR: 2, COD_VAR: "displayName", DATA_TYPE: "STRING", LENGTH: 20 },
        {
          NUM_VAR: 3,
          COD_VAR: "tgtId",
          DATA_TYPE: "STRING",
          LENGTH: 10,
          TIPO_CAMPO: "VARS",
          TIPO_VAR: "Tgt",
        },
        { NUM_VAR: 4, COD_VAR: "select", DATA_TYPE: "STRING", LENGTH: 10 },
      ],
      {
        TB_DIM: [{ COD_DIM: "Tgt", TABLE_NAME: "TbTarget", ID_FIELD: "tgtId" }],
        TB_VAR: [{ COD_DIM: "Tgt", NUM_VAR: 1, COD_VAR: "tgtId", DATA_TYPE: "STRING", LENGTH: 10 }],
      },
    );
    const result = await sync(db, target, mixed);
    expect(result.created).toEqual(["TbTarget", "Tb_MixedCase"]);
    expect([...(await columns(db, "Tb_MixedCase")).keys()].slice(0, 4)).toEqual([
      "mixedId",
      "displayName",
      "tgtId",
      "select",
    ]);
    expect(await primaryKey(db, "Tb_MixedCase")).toEqual(["TENANT_ID", "mixedId"]);
    expect(
      (await indexes(db, "Tb_MixedCase")).some((d) => d.includes(`("TENANT_ID", "tgtId", "mixedId")`)),
    ).toBe(true);
    await db.query(
      `INSERT INTO "Tb_MixedCase" ("displayName", "select", "TENANT_ID") VALUES ('x', 'y', 't')`,
    );
    // Altering it later works too, and a second run is a no-op.
    const wider = dimension(
      { COD_DIM: "Mixed", TABLE_NAME: "Tb_MixedCase", ID_FIELD: "mixedId" },
      [
        { NUM_VAR: 1, COD_VAR: "mixedId", DATA_TYPE: "INTEGER" },
        { NUM_VAR: 2, COD_VAR: "displayName", DATA_TYPE: "STRING", LENGTH: 50 },
        {
          NUM_VAR: 3,
          COD_VAR: "tgtId",
          DATA_TYPE: "STRING",
          LENGTH: 10,
          TIPO_CAMPO: "VARS",
          TIPO_VAR: "Tgt",
        },
        { NUM_VAR: 4, COD_VAR: "select", DATA_TYPE: "STRING", LENGTH: 10 },
        { NUM_VAR: 5, COD_VAR: "newCol", DATA_TYPE: "TEXT" },
      ],
      {
        TB_DIM: [{ COD_DIM: "Tgt", TABLE_NAME: "TbTarget", ID_FIELD: "tgtId" }],
        TB_VAR: [{ COD_DIM: "Tgt", NUM_VAR: 1, COD_VAR: "tgtId", DATA_TYPE: "STRING", LENGTH: 10 }],
      },
    );
    expect((await sync(db, wider)).altered).toEqual(["Tb_MixedCase"]);
    expect(await sync(db, wider)).toEqual({ created: [], altered: [], statements: [] });
    // A lower-case twin is a different table.
    expect(await columns(db, "tb_mixedcase")).toEqual(new Map());
  });

  it("a field index of the earlier form (TENANT_ID, field) is replaced by (TENANT_ID, field, id), the old one dropped after the new is built", async () => {
    const d = dimension({ COD_DIM: "UPG", TABLE_NAME: "TB_UPG00", ID_FIELD: "U_ID" }, [
      { NUM_VAR: 1, COD_VAR: "U_ID", DATA_TYPE: "INTEGER" },
      { NUM_VAR: 2, COD_VAR: "NAME", DATA_TYPE: "STRING", LENGTH: 40, INDEXED: true },
    ]);
    await sync(db, d);
    expect(
      (await indexes(db, "TB_UPG00")).some(
        (x) => x.includes(`"TB_UPG00_NAME_U_ID_idx"`) && x.endsWith(`("TENANT_ID", "NAME", "U_ID")`),
      ),
    ).toBe(true);
    // A table synced before the id closed field indexes.
    await db.query(`DROP INDEX "TB_UPG00_NAME_U_ID_idx"`);
    await db.query(`CREATE INDEX "TB_UPG00_NAME_idx" ON "TB_UPG00" ("TENANT_ID", "NAME")`);
    const upgraded = await syncFrom(db, d, d);
    expect(upgraded.statements).toEqual([
      `CREATE INDEX IF NOT EXISTS "TB_UPG00_NAME_U_ID_idx" ON "TB_UPG00" ("TENANT_ID", "NAME", "U_ID")`,
      `DROP INDEX IF EXISTS "TB_UPG00_NAME_idx"`,
    ]);
    const after = await indexes(db, "TB_UPG00");
    expect(after.some((x) => x.includes(`"TB_UPG00_NAME_idx"`))).toBe(false);
    expect(after.some((x) => x.includes(`("TENANT_ID", "NAME", "U_ID")`))).toBe(true);
    // Deferred (a metadata write on PostgreSQL): the build and then the drop wait for the commit.
    await db.query(`DROP INDEX "TB_UPG00_NAME_U_ID_idx"`);
    await db.query(`CREATE INDEX "TB_UPG00_NAME_idx" ON "TB_UPG00" ("TENANT_ID", "NAME")`);
    const deferred = await db.transaction((tx) =>
      syncTables(tx, [d], new Map([[d.code, d]]), { deferIndexes: true }),
    );
    expect(deferred.deferred?.map((b) => indexBuildSql(b, { concurrently: false }))).toEqual(
      upgraded.statements,
    );
    expect((await indexes(db, "TB_UPG00")).some((x) => x.includes(`"TB_UPG00_NAME_idx"`))).toBe(true);
    expect(await sync(db, d)).toMatchObject({ statements: upgraded.statements });
  });

  it("a long table name gets index names within PostgreSQL's 63 characters", async () => {
    const long = "T".repeat(58);
    const d = dimension(
      { COD_DIM: "LONGT", TABLE_NAME: long, ID_FIELD: "L_ID" },
      [
        { NUM_VAR: 1, COD_VAR: "L_ID", DATA_TYPE: "INTEGER" },
        { NUM_VAR: 2, COD_VAR: "OWN_ID", DATA_TYPE: "STRING", LENGTH: 12, TIPO_CAMPO: "AC", TIPO_VAR: "OWN" },
      ],
      {
        TB_DIM: [{ COD_DIM: "OWN", TABLE_NAME: "TB_OWN00", ID_FIELD: "OWN_ID" }],
        TB_VAR: [{ COD_DIM: "OWN", NUM_VAR: 1, COD_VAR: "OWN_ID", DATA_TYPE: "STRING", LENGTH: 12 }],
      },
    );
    await sync(db, d);
    expect(await primaryKey(db, long)).toEqual(["TENANT_ID", "L_ID"]);
    expect(await sync(db, d)).toEqual({ created: [], altered: [], statements: [] });
  });
});
