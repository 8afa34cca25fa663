// Fixture import (src/fixtures/import.ts) of fixtures/sample.json: rows written, import
// twice changes nothing, --reset reloads, a broken copy is refused whole with every problem listed.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { verifyPassword } from "../../src/auth/passwords.ts";
import { MetadataError } from "../../src/errors.ts";
import { importFixture, readFixtureFile } from "../../src/fixtures/import.ts";
import { mapError } from "../../src/http/error-handler.ts";
import { lockMetadataWrites, upsertMetadataRows } from "../../src/metadata/store.ts";
import type { Services } from "../../src/services.ts";
import { BACKENDS, createTestServices, manualClock, SAMPLE_FIXTURE } from "../helpers/env.ts";

type Row = Record<string, unknown>;
type Sample = {
  TB_VAR: Row[];
  TB_COST: Row[];
  TB_MENU: Row[];
  TB_OBJECT: Row[];
  TB_DIM: Row[];
  users: Row[];
  records: Record<string, Array<{ tenant_id: string; data: Row }>>;
};

const DIM_TABLES = [
  "TB_ANAG_CITY00",
  "TB_ANAG_CUST00",
  "TB_ANAG_ADDR00",
  "TB_ANAG_PROD00",
  "TB_ANAG_LST00",
  "TB_ANAG_PRICE00",
  "TB_DOC_ORD00",
  "TB_DOC_ORDL00",
];
const FIXED_TABLES = [
  "TB_DIM",
  "TB_VAR",
  "TB_COST",
  "TB_OBJECT",
  "TB_MENU",
  "TB_SORT",
  "TB_DOCUMENT",
  "TB_TENANT",
  "TB_USER",
  "TB_USER_GRANT",
  "TB_ANAG_OUTBOX00",
  "TB_SEQUENCE",
  "TB_IMPORT_LEDGER",
];

async function loadSample(): Promise<Sample> {
  return (await readFixtureFile(SAMPLE_FIXTURE)) as Sample;
}

async function count(services: Services, table: string): Promise<number> {
  const res = await services.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${table}"`);
  return res.rows[0]!.n;
}

async function counts(services: Services, tables: string[]): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const t of tables) out[t] = await count(services, t);
  return out;
}

async function version(services: Services): Promise<number> {
  const res = await services.db.query<{ VERSION: number }>(
    `SELECT "VERSION" FROM "TB_META_STATE" WHERE "ID" = 1`,
  );
  return Number(res.rows[0]!.VERSION);
}

async function userHashes(services: Services): Promise<Record<string, string>> {
  const res = await services.db.query<{ USER_ID: string; PASSWORD_HASH: string }>(
    `SELECT "USER_ID", "PASSWORD_HASH" FROM "TB_USER" ORDER BY "USER_ID"`,
  );
  return Object.fromEntries(res.rows.map((r) => [r.USER_ID, r.PASSWORD_HASH]));
}

async function refusal(p: Promise<unknown>): Promise<MetadataError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(MetadataError);
    return err as MetadataError;
  }
  throw new Error("the import was accepted");
}

/** A copy of the sample with four problems of four kinds. */
function brokenCopy(sample: Sample): Sample {
  const copy = structuredClone(sample);
  copy.TB_VAR[3]!.DATA_TYPE = "BLOB";
  copy.TB_COST.push({ COD_DIM: "CUST", NUM_COST: 200, COD_VAR: "NO_SUCH_FIELD", COD_ON_OFF: "LDR" });
  copy.TB_MENU[3] = { ...copy.TB_MENU[3]!, NLEFT: 4, NRIGHT: 7 }; // overlaps anag-1 [3,4] and anag-3 [7,8]
  copy.TB_OBJECT.push({
    COD_DIM: "CUST",
    COD_VAR: "SALES_REP",
    COD_DIM_OBJ: "GHOST",
    COD_VAR_OBJ: "GHOST_ID",
  });
  // A change that would be harmless on its own must not be applied either.
  copy.TB_DIM[0]!.DESC_DIM = "Changed by the broken copy";
  return copy;
}

function expectFourProblems(err: MetadataError) {
  expect(err.status).toBe(400);
  expect(err.code).toBe("INVALID_METADATA");
  const paths = err.errors!.map((e) => e.field);
  expect(err.errors!.length).toBeGreaterThanOrEqual(4);
  expect(paths).toContain("TB_VAR[3].DATA_TYPE");
  expect(paths).toContain("TB_COST[46].COD_VAR");
  expect(paths).toContain("TB_OBJECT[8].COD_DIM_OBJ");
  expect(paths.some((p) => p.startsWith("TB_MENU["))).toBe(true);
  for (const e of err.errors!) expect(e.message).toEqual(expect.any(String));
}

describe.each(BACKENDS)("importing the sample fixture on %s", (backend) => {
  let services: Services;
  let sample: Sample;
  let afterFirst: Record<string, number>;
  let versionAfterFirst: number;
  let hashesAfterFirst: Record<string, string>;

  beforeAll(async () => {
    sample = await loadSample();
    services = await createTestServices(backend, { fixture: "sample", clock: manualClock() });
    afterFirst = await counts(services, [...DIM_TABLES, ...FIXED_TABLES]);
    versionAfterFirst = await version(services);
    hashesAfterFirst = await userHashes(services);
  });
  afterAll(async () => {
    await services?.close();
  });

  it("writes the metadata rows, and the registry holds the 8 dimensions", async () => {
    expect(afterFirst).toMatchObject({
      TB_DIM: 8,
      TB_VAR: 45,
      TB_COST: 46,
      TB_OBJECT: 8,
      TB_MENU: 12,
      TB_SORT: 2,
      TB_DOCUMENT: 1,
      TB_TENANT: 2,
    });
    expect(versionAfterFirst).toBeGreaterThan(1);
    const model = services.metadata.current();
    expect(model.version).toBe(versionAfterFirst);
    expect([...model.dimensions.keys()].sort()).toEqual(
      ["ADDR", "CITY", "CUST", "LST", "ORD", "ORDL", "PRICE", "PROD"].sort(),
    );
    const doc = await services.prisma.tbDocument.findUnique({ where: { DOC_NAME: "listino" } });
    expect(doc?.DEFINITION).toEqual((sample as unknown as { TB_DOCUMENT: Row[] }).TB_DOCUMENT[0]!.DEFINITION);
    const cost = await services.prisma.tbCost.findUnique({
      where: { COD_DIM_NUM_COST: { COD_DIM: "CUST", NUM_COST: 100 } },
    });
    expect(cost).toMatchObject({ COD_VAR: "SALES_REP", CENTER_DETT: "nuovo", VALUE_TEMP: "{user}" });
  });

  it("creates the 8 dimension tables", async () => {
    const res = await services.db.query<{ table_name: string }>(
      `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = ANY($1::text[])`,
      [DIM_TABLES],
    );
    expect(res.rows.map((r) => r.table_name).sort()).toEqual([...DIM_TABLES].sort());
  });

  it("creates users with scrypt hashes, never the plain passwords, and their grants", async () => {
    const users = await services.prisma.tbUser.findMany({
      orderBy: { USER_ID: "asc" },
      include: { grants: true },
    });
    expect(users.map((u) => u.USER_ID)).toEqual(["anna", "greta", "lucia", "marco"]);
    for (const u of users) {
      const given = sample.users.find((s) => s.user_id === u.USER_ID)!;
      expect(u.PASSWORD_HASH).toMatch(/^scrypt\$/);
      expect(u.PASSWORD_HASH).not.toContain(String(given.password));
      expect(await verifyPassword(String(given.password), u.PASSWORD_HASH)).toBe(true);
      expect(await verifyPassword("wrong", u.PASSWORD_HASH)).toBe(false);
    }
    const anna = users.find((u) => u.USER_ID === "anna")!;
    expect(anna).toMatchObject({
      TENANT_ID: "acme",
      PESO: "1",
      CENTRO_DETT: "HQ",
      AMBIENTE: "production",
      LINGUA: "it",
      ACTIVE: true,
    });
    expect(anna.grants.map((g) => [g.COD_MENU, g.OPERATIONS, g.LEVEL]).sort()).toEqual([
      ["erp", ["read", "write", "force_delete", "metadata"], 4],
      ["price-1", ["read", "write"], 4],
    ]);
    expect(users.find((u) => u.USER_ID === "greta")!.TENANT_ID).toBe("globex");
    expect(afterFirst.TB_USER_GRANT).toBe(8);
  });

  it("creates the records with templates applied and insert cascades", async () => {
    expect(afterFirst).toMatchObject({
      TB_ANAG_CITY00: 8,
      TB_ANAG_CUST00: 5,
      TB_ANAG_ADDR00: 3,
      TB_ANAG_PROD00: 3,
      TB_ANAG_LST00: 2,
      TB_ANAG_PRICE00: 3,
      TB_DOC_ORD00: 2,
      TB_DOC_ORDL00: 2,
    });
    const ord = await services.db.query<Row>(
      `SELECT "ORD_ID", "ORD_NO", "CUST_ID", "ORD_DATE", "STATUS", "TOTAL", "TREC", "CDATA", "OWNER", "TENANT_ID"
         FROM "TB_DOC_ORD00" ORDER BY "ORD_ID"`,
    );
    expect(ord.rows).toEqual([
      {
        ORD_ID: 1,
        ORD_NO: "ORD-2026-000001",
        CUST_ID: 1,
        ORD_DATE: "20261102",
        STATUS: "O",
        TOTAL: 12,
        TREC: "N",
        CDATA: "20261121100000",
        OWNER: "system",
        TENANT_ID: "acme",
      },
      {
        ORD_ID: 2,
        ORD_NO: "ORD-2026-000002",
        CUST_ID: 2,
        ORD_DATE: "20261110",
        STATUS: "O",
        TOTAL: 5,
        TREC: "N",
        CDATA: "20261121100000",
        OWNER: "system",
        TENANT_ID: "acme",
      },
    ]);
    const prod = await services.db.query<Row>(
      `SELECT "PROD_ID", "NAME", "UNIT_PRICE", "LAUNCHED", "SPECS" FROM "TB_ANAG_PROD00" ORDER BY "PROD_ID"`,
    );
    expect(prod.rows).toEqual([
      { PROD_ID: "P0001", NAME: "Bolt M8", UNIT_PRICE: 0.12, LAUNCHED: "20261121", SPECS: { din: 933 } },
      { PROD_ID: "P0002", NAME: "Nut M8", UNIT_PRICE: 0.05, LAUNCHED: "20261121", SPECS: null },
      { PROD_ID: "P0003", NAME: "Washer 8mm", UNIT_PRICE: 0.02, LAUNCHED: "20261121", SPECS: null },
    ]);
    const cust = await services.db.query<Row>(
      `SELECT "CUST_ID", "CODE", "TENANT_ID", "CREDIT_LIMIT", "VIP" FROM "TB_ANAG_CUST00" ORDER BY "TENANT_ID", "CUST_ID"`,
    );
    expect(cust.rows).toEqual([
      { CUST_ID: 1, CODE: "C-00001", TENANT_ID: "acme", CREDIT_LIMIT: 50000, VIP: true },
      { CUST_ID: 2, CODE: "C-00002", TENANT_ID: "acme", CREDIT_LIMIT: 120000, VIP: false },
      { CUST_ID: 3, CODE: "C-00003", TENANT_ID: "acme", CREDIT_LIMIT: 8000.5, VIP: null },
      { CUST_ID: 4, CODE: "C-00004", TENANT_ID: "acme", CREDIT_LIMIT: null, VIP: null },
      // The sequence is per tenant.
      { CUST_ID: 5, CODE: "C-00001", TENANT_ID: "globex", CREDIT_LIMIT: 70000, VIP: null },
    ]);
    const lines = await services.db.query<Row>(
      `SELECT "ORDL_ID", "ORD_ID", "PROD_ID", "QTY", "PRICE", "TREC", "TENANT_ID" FROM "TB_DOC_ORDL00" ORDER BY "ORDL_ID"`,
    );
    expect(lines.rows).toEqual([
      { ORDL_ID: 1, ORD_ID: 1, PROD_ID: "P0001", QTY: 100, PRICE: 0.12, TREC: "N", TENANT_ID: "acme" },
      { ORDL_ID: 2, ORD_ID: 2, PROD_ID: "P0002", QTY: 100, PRICE: 0.05, TREC: "N", TENANT_ID: "acme" },
    ]);
    const cities = await services.db.query<{ TENANT_ID: string; n: number }>(
      `SELECT "TENANT_ID", count(*)::int AS n FROM "TB_ANAG_CITY00" GROUP BY "TENANT_ID" ORDER BY 1`,
    );
    expect(cities.rows).toEqual([
      { TENANT_ID: "acme", n: 4 },
      { TENANT_ID: "globex", n: 4 },
    ]);
  });

  it("writes one outbox row per record created (cascaded children included)", async () => {
    const records = Object.values(sample.records).reduce((n, l) => n + l.length, 0);
    expect(afterFirst.TB_ANAG_OUTBOX00).toBe(records + 2);
    const events = await services.db.query<{ EVENT_TYPE: string; n: number }>(
      `SELECT "EVENT_TYPE", count(*)::int AS n FROM "TB_ANAG_OUTBOX00" GROUP BY 1 ORDER BY 1`,
    );
    expect(events.rows).toEqual([
      { EVENT_TYPE: "ADDRCreated", n: 3 },
      { EVENT_TYPE: "CITYCreated", n: 8 },
      { EVENT_TYPE: "CUSTCreated", n: 5 },
      { EVENT_TYPE: "LSTCreated", n: 2 },
      { EVENT_TYPE: "ORDCreated", n: 2 },
      { EVENT_TYPE: "ORDLCreated", n: 2 },
      { EVENT_TYPE: "PRICECreated", n: 3 },
      { EVENT_TYPE: "PRODCreated", n: 3 },
    ]);
    const first = await services.db.query<Row>(
      `SELECT "AGGREGATE_TYPE", "AGGREGATE_ID", "TENANT_ID", "PAYLOAD", "PUBLISHED_AT" FROM "TB_ANAG_OUTBOX00"
        WHERE "EVENT_TYPE" = 'ORDCreated' ORDER BY "OUTBOX_ID" LIMIT 1`,
    );
    expect(first.rows[0]).toMatchObject({
      AGGREGATE_TYPE: "ORD",
      AGGREGATE_ID: "1",
      TENANT_ID: "acme",
      PUBLISHED_AT: null,
      PAYLOAD: expect.objectContaining({ ORD_ID: 1, ORD_NO: "ORD-2026-000001", TREC: "N" }),
    });
  });

  it("importing it twice changes nothing: same row counts, metadata version and user hashes", async () => {
    const summary = await importFixture(services, await loadSample());
    expect(summary).toMatchObject({
      metadataChanged: 0,
      tablesCreated: [],
      tablesAltered: [],
      recordsCreated: 0,
    });
    expect(summary.recordsSkipped).toBe(26); // the fixture's 26 records; their 2 children came with them
    expect(await counts(services, [...DIM_TABLES, ...FIXED_TABLES])).toEqual(afterFirst);
    expect(await version(services)).toBe(versionAfterFirst);
    expect(await userHashes(services)).toEqual(hashesAfterFirst);
    expect(services.metadata.current().version).toBe(versionAfterFirst);
  });

  it("a broken copy (four kinds of problem in one file) is refused whole, every problem listed", async () => {
    const before = await counts(services, [...DIM_TABLES, ...FIXED_TABLES]);
    const err = await refusal(importFixture(services, brokenCopy(await loadSample())));
    expectFourProblems(err);
    expect(await counts(services, [...DIM_TABLES, ...FIXED_TABLES])).toEqual(before);
    expect(await version(services)).toBe(versionAfterFirst);
    const city = await services.prisma.tbDim.findUnique({ where: { COD_DIM: "CITY" } });
    expect(city?.DESC_DIM).toBe("Cities");
    expect(await userHashes(services)).toEqual(hashesAfterFirst);
  });

  it("a password change re-hashes that user only", async () => {
    const changed = await loadSample();
    changed.users[1]!.password = "marco-new-secret";
    await importFixture(services, changed);
    const hashes = await userHashes(services);
    expect(hashes.anna).toBe(hashesAfterFirst.anna);
    expect(hashes.marco).not.toBe(hashesAfterFirst.marco);
    expect(await verifyPassword("marco-new-secret", hashes.marco!)).toBe(true);
    await importFixture(services, await loadSample());
    expect(await verifyPassword("marco-secret-2", (await userHashes(services)).marco!)).toBe(true);
  });

  it("--reset reloads: the fixture's tables are emptied, ids and sequences restart", async () => {
    await services.db.query(
      `INSERT INTO "TB_ANAG_CUST00" ("CODE", "NAME", "TENANT_ID") VALUES ('X-1', 'Extra customer', 'acme')`,
    );
    const outboxBefore = await count(services, "TB_ANAG_OUTBOX00");
    const summary = await importFixture(services, await loadSample(), { reset: true });
    expect(summary.recordsCreated).toBe(28);
    expect(summary.recordsSkipped).toBe(0);
    const now = await counts(services, DIM_TABLES);
    expect(now).toEqual(Object.fromEntries(DIM_TABLES.map((t) => [t, afterFirst[t]])));
    const cust = await services.db.query<Row>(
      `SELECT "CUST_ID", "CODE", "NAME" FROM "TB_ANAG_CUST00" ORDER BY "CUST_ID" LIMIT 2`,
    );
    expect(cust.rows).toEqual([
      { CUST_ID: 1, CODE: "C-00001", NAME: "Rossi Srl" },
      { CUST_ID: 2, CODE: "C-00002", NAME: "Bianchi SpA" },
    ]);
    const ord = await services.db.query<Row>(
      `SELECT "ORD_ID", "ORD_NO" FROM "TB_DOC_ORD00" ORDER BY "ORD_ID"`,
    );
    expect(ord.rows).toEqual([
      { ORD_ID: 1, ORD_NO: "ORD-2026-000001" },
      { ORD_ID: 2, ORD_NO: "ORD-2026-000002" },
    ]);
    expect(await count(services, "TB_IMPORT_LEDGER")).toBe(afterFirst.TB_IMPORT_LEDGER);
    expect(await count(services, "TB_ANAG_OUTBOX00")).toBe(outboxBefore + 28);
    expect(await count(services, "TB_USER")).toBe(4);
    expect(await count(services, "TB_USER_GRANT")).toBe(8);
    expect(await version(services)).toBe(versionAfterFirst);
  });
  it("a later fixture that only adds a field to a stored dimension adds its column and loads records", async () => {
    const versionBefore = await version(services);
    const summary = await importFixture(services, {
      TB_DIM: [],
      TB_VAR: [{ COD_DIM: "CUST", NUM_VAR: 12, COD_VAR: "VAT_NO", DATA_TYPE: "STRING", LENGTH: 16 }],
      TB_COST: [{ COD_DIM: "CUST", NUM_COST: 12, COD_VAR: "VAT_NO", COD_ON_OFF: "LDRNM" }],
      records: { CUST: [{ tenant_id: "acme", data: { NAME: "Gialli Srl", VAT_NO: "IT01234567890" } }] },
    });
    expect(summary.tablesAltered).toEqual(["TB_ANAG_CUST00"]);
    expect(summary.recordsCreated).toBe(1);
    expect(await version(services)).toBe(versionBefore + 1);
    const row = await services.db.query<Row>(
      `SELECT "NAME", "VAT_NO" FROM "TB_ANAG_CUST00" WHERE "VAT_NO" IS NOT NULL`,
    );
    expect(row.rows).toEqual([{ NAME: "Gialli Srl", VAT_NO: "IT01234567890" }]);
    expect(services.metadata.current().dimensions.get("CUST")!.fieldsByCode.has("VAT_NO")).toBe(true);
  });
});

describe.each(BACKENDS)("refused fixtures, then re-imports, on an empty database (%s)", (backend) => {
  let services: Services;
  beforeAll(async () => {
    services = await createTestServices(backend);
  });
  afterAll(async () => {
    await services?.close();
  });

  it("the broken copy writes nothing at all", async () => {
    const err = await refusal(importFixture(services, brokenCopy(await loadSample())));
    expectFourProblems(err);
    const after = await counts(services, FIXED_TABLES);
    expect(Object.values(after).every((n) => n === 0)).toBe(true);
    expect(await version(services)).toBe(1);
    const tables = await services.db.query(
      `SELECT 1 FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = 'TB_ANAG_CUST00'`,
    );
    expect(tables.rows).toEqual([]);
  });

  it("the importer's error is the standard body: 400 INVALID_METADATA with errors [{field, message}]", async () => {
    const err = await refusal(importFixture(services, brokenCopy(await loadSample())));
    const mapped = mapError(err);
    expect(mapped.status).toBe(400);
    expect(mapped.body).toMatchObject({
      error: "ValidationError",
      code: "INVALID_METADATA",
      status: 400,
      message: expect.stringContaining("nothing was written"),
    });
    expect(mapped.body.errors).toContainEqual({
      field: "TB_VAR[3].DATA_TYPE",
      message: 'unknown DATA_TYPE "BLOB"',
    });
  });

  it("a fixture of the wrong shape lists each shape problem with its path", async () => {
    const err = await refusal(
      importFixture(services, {
        TB_DIM: [{ COD_DIM: "A", TABLE_NAME: "TB_A" }],
        TB_VAR: "nope",
        users: [{ user_id: "u", tenant_id: "t", peso: "1" }],
      }),
    );
    const paths = err.errors!.map((e) => e.field);
    expect(paths).toContain("TB_DIM.0.ID_FIELD");
    expect(paths).toContain("TB_VAR");
    expect(paths).toContain("users.0.password");
  });

  it("users, grants and records that name missing tenants, menus or dimensions are listed", async () => {
    const err = await refusal(
      importFixture(services, {
        TB_DIM: [{ COD_DIM: "A", TABLE_NAME: "TB_A", ID_FIELD: "A_ID" }],
        TB_VAR: [{ COD_DIM: "A", NUM_VAR: 1, COD_VAR: "A_ID", DATA_TYPE: "INTEGER" }],
        users: [
          {
            user_id: "u",
            password: "p",
            tenant_id: "nowhere",
            peso: "7",
            grants: [{ COD_MENU: "m", OPERATIONS: ["read"], LEVEL: 1 }],
          },
        ],
        records: { B: [{ tenant_id: "nowhere", data: {} }] },
      }),
    );
    expect(err.errors!.map((e) => e.field).sort()).toEqual(
      [
        "records.B",
        "records.B[0].tenant_id",
        "users[0].grants[0].COD_MENU",
        "users[0].peso",
        "users[0].tenant_id",
      ].sort(),
    );
    expect(await count(services, "TB_DIM")).toBe(0);
  });

  it("a record the write path refuses rolls back the whole import", async () => {
    const err = await refusal(
      importFixture(services, {
        tenants: [{ TENANT_ID: "t1" }],
        TB_DIM: [{ COD_DIM: "A", TABLE_NAME: "TB_A", ID_FIELD: "A_ID" }],
        TB_VAR: [
          { COD_DIM: "A", NUM_VAR: 1, COD_VAR: "A_ID", DATA_TYPE: "INTEGER" },
          { COD_DIM: "A", NUM_VAR: 2, COD_VAR: "NAME", DATA_TYPE: "STRING", LENGTH: 3 },
        ],
        records: {
          A: [
            { tenant_id: "t1", data: { NAME: "ok" } },
            { tenant_id: "t1", data: { NAME: "too long" } },
          ],
        },
      }),
    );
    expect(err.errors).toEqual([{ field: "records.A[1]", message: expect.stringContaining("NAME") }]);
    expect(
      await counts(services, ["TB_DIM", "TB_VAR", "TB_TENANT", "TB_ANAG_OUTBOX00", "TB_IMPORT_LEDGER"]),
    ).toEqual({
      TB_DIM: 0,
      TB_VAR: 0,
      TB_TENANT: 0,
      TB_ANAG_OUTBOX00: 0,
      TB_IMPORT_LEDGER: 0,
    });
    expect(await version(services)).toBe(1);
  });

  it("a re-import leaving a column out gives it its default, in the rows, the model and the table alike", async () => {
    const first = {
      tenants: [{ TENANT_ID: "t1" }],
      TB_DIM: [{ COD_DIM: "RE", TABLE_NAME: "TB_RE00", ID_FIELD: "RE_ID", AUDIT_STYLE: "CREATED" }],
      TB_VAR: [
        { COD_DIM: "RE", NUM_VAR: 1, COD_VAR: "RE_ID", DATA_TYPE: "INTEGER" },
        { COD_DIM: "RE", NUM_VAR: 2, COD_VAR: "NAME", DATA_TYPE: "STRING", LENGTH: 40, NULLABLE: false },
      ],
    };
    await importFixture(services, first);
    const second = {
      TB_DIM: [{ COD_DIM: "RE", TABLE_NAME: "TB_RE00", ID_FIELD: "RE_ID" }],
      TB_VAR: [
        { COD_DIM: "RE", NUM_VAR: 1, COD_VAR: "RE_ID", DATA_TYPE: "INTEGER" },
        { COD_DIM: "RE", NUM_VAR: 2, COD_VAR: "NAME", DATA_TYPE: "STRING" },
      ],
      records: { RE: [{ tenant_id: "t1", data: { NAME: "x".repeat(100) } }] },
    };
    await importFixture(services, second);
    const stored = await services.prisma.tbDim.findUnique({ where: { COD_DIM: "RE" } });
    const re = services.metadata.current().dimensions.get("RE")!;
    expect(stored!.AUDIT_STYLE).toBe("TREC");
    expect(re.auditStyle).toBe("TREC");
    expect(re.fieldsByCode.get("NAME")).toMatchObject({ length: null, nullable: true });
    const cols = await services.db.query<{
      column_name: string;
      character_maximum_length: number | null;
      is_nullable: string;
    }>(
      `SELECT column_name, character_maximum_length, is_nullable FROM information_schema.columns
        WHERE table_schema = current_schema() AND table_name = 'TB_RE00' ORDER BY ordinal_position`,
    );
    expect(cols.rows.map((c) => c.column_name).sort()).toEqual(
      ["RE_ID", "NAME", "TREC", "CDATA", "OWNER", "LDATA", "LOWNER", "TENANT_ID"].sort(),
    );
    expect(cols.rows.find((c) => c.column_name === "CREATED_AT")).toBeUndefined();
    expect(cols.rows.find((c) => c.column_name === "NAME")).toMatchObject({
      character_maximum_length: 255,
      is_nullable: "YES",
    });
    const row = await services.db.query<Row>(`SELECT "NAME", "TREC", "OWNER" FROM "TB_RE00"`);
    expect(row.rows).toEqual([{ NAME: "x".repeat(100), TREC: "N", OWNER: "system" }]);
  });

  it("a file that is not JSON is a MetadataError naming the file", async () => {
    const err = await refusal(readFixtureFile(new URL(import.meta.url).pathname));
    expect(err.errors![0]!.field).toBe("(file)");
  });

  it("a record nested deeper than the JSON limit is a listed problem, not a crash", async () => {
    let deep: unknown = 1;
    for (let i = 0; i < 20_000; i++) deep = [deep];
    const fixture = {
      ...(await loadSample()),
      records: { PROD: [{ tenant_id: "acme", data: { NAME: "n", UNIT_PRICE: 1, SPECS: deep } }] },
    };
    const err = await refusal(importFixture(services, fixture));
    expect(err.errors).toContainEqual({
      field: "records.PROD[0].data",
      message: "nested deeper than 64 levels",
    });
  });

  it("a missing file is a MetadataError saying so, not a raw error", async () => {
    const err = await refusal(readFixtureFile("/nonexistent/fixture.json"));
    expect(err.message).toContain("/nonexistent/fixture.json");
    expect(err.errors).toEqual([{ field: "(file)", message: "no such file" }]);
  });

  it("metadata text longer than its column is a listed problem, not a database error", async () => {
    const before = await services.db.query(`SELECT count(*)::int AS n FROM "TB_DIM"`);
    const fixture = {
      TB_DIM: [{ COD_DIM: "LONG", DESC_DIM: "d".repeat(300), TABLE_NAME: "TB_LONG00", ID_FIELD: "LONG_ID" }],
      TB_VAR: [{ COD_DIM: "LONG", NUM_VAR: 1, COD_VAR: "LONG_ID", DATA_TYPE: "INTEGER", RENDER_HINT: "x" }],
    };
    const err = await refusal(importFixture(services, fixture));
    expect(err.errors).toContainEqual({
      field: "TB_DIM[0].DESC_DIM",
      message: "is 300 characters long; at most 200",
    });
    const after = await services.db.query(`SELECT count(*)::int AS n FROM "TB_DIM"`);
    expect(after.rows).toEqual(before.rows);
  });
});

describe.each(BACKENDS)("--reset and concurrent metadata writes (%s)", (backend) => {
  let services: Services;
  beforeAll(async () => {
    services = await createTestServices(backend, { fixture: "sample" });
  });
  afterAll(async () => {
    await services?.close();
  });

  async function sequences(): Promise<Row[]> {
    const res = await services.db.query<Row>(
      `SELECT "TENANT_ID", "SEQ_NAME", "VALUE" FROM "TB_SEQUENCE" ORDER BY "TENANT_ID", "SEQ_NAME"`,
    );
    return res.rows.map((r) => ({ ...r, VALUE: Number(r.VALUE) }));
  }
  async function columnType(table: string, column: string): Promise<string | undefined> {
    const res = await services.db.query<{ data_type: string }>(
      `SELECT data_type FROM information_schema.columns
        WHERE table_schema = current_schema() AND table_name = $1 AND column_name = $2`,
      [table, column],
    );
    return res.rows[0]?.data_type;
  }

  it("--reset empties the tables before syncing them: a type change of a filled column is then applied", async () => {
    const changed = await loadSample();
    changed.TB_VAR.find((v) => v.COD_DIM === "CUST" && v.COD_VAR === "EMAIL")!.DATA_TYPE = "INTEGER";
    changed.records.CUST = changed.records.CUST!.map((r) => {
      const { EMAIL: _email, ...data } = r.data;
      return { ...r, data };
    });
    await expect(importFixture(services, changed)).rejects.toMatchObject({
      status: 409,
      code: "UNSAFE_SCHEMA_CHANGE",
      errors: [{ field: "CUST.EMAIL", message: expect.any(String) }],
    });
    expect(await columnType("TB_ANAG_CUST00", "EMAIL")).toBe("character varying");

    const summary = await importFixture(services, changed, { reset: true });
    expect(summary.tablesAltered).toEqual(["TB_ANAG_CUST00"]);
    expect(summary.recordsCreated).toBe(28);
    expect(await columnType("TB_ANAG_CUST00", "EMAIL")).toBe("bigint");
    expect(await count(services, "TB_ANAG_CUST00")).toBe(5);
    const stored = await services.prisma.tbVar.findUnique({
      where: { COD_DIM_COD_VAR: { COD_DIM: "CUST", COD_VAR: "EMAIL" } },
    });
    expect(stored!.DATA_TYPE).toBe("INTEGER");
  });

  it("--reset restarts, for every tenant, the sequences of the emptied dimensions' templates, and only those", async () => {
    expect(await sequences()).toEqual([
      { TENANT_ID: "acme", SEQ_NAME: "CUST", VALUE: 4 },
      { TENANT_ID: "acme", SEQ_NAME: "ORD", VALUE: 2 },
      { TENANT_ID: "acme", SEQ_NAME: "PROD", VALUE: 3 },
      { TENANT_ID: "globex", SEQ_NAME: "CUST", VALUE: 1 },
    ]);
    // Only CUST is in this fixture (records of acme only): CUST is emptied for both tenants.
    await importFixture(
      services,
      { TB_DIM: [], TB_VAR: [], records: { CUST: [{ tenant_id: "acme", data: { NAME: "Solo Srl" } }] } },
      { reset: true },
    );
    const cust = await services.db.query<Row>(
      `SELECT "CUST_ID", "CODE", "TENANT_ID" FROM "TB_ANAG_CUST00" ORDER BY "CUST_ID"`,
    );
    expect(cust.rows).toEqual([{ CUST_ID: 1, CODE: "C-00001", TENANT_ID: "acme" }]);
    expect(await sequences()).toEqual([
      { TENANT_ID: "acme", SEQ_NAME: "CUST", VALUE: 1 },
      { TENANT_ID: "acme", SEQ_NAME: "ORD", VALUE: 2 },
      { TENANT_ID: "acme", SEQ_NAME: "PROD", VALUE: 3 },
    ]);
    expect(await count(services, "TB_DOC_ORD00")).toBe(2);
  });

  it("the importer waits for the metadata write lock and validates against what was committed meanwhile", async () => {
    let release!: () => void;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    let locked!: () => void;
    const holding = new Promise<void>((resolve) => {
      locked = resolve;
    });
    // A metadata write in progress: it holds the lock and adds a dimension on table TB_LK00.
    const writer = services.db.transaction(async (tx) => {
      await lockMetadataWrites(tx);
      await upsertMetadataRows(tx, {
        TB_DIM: [{ COD_DIM: "LKA", TABLE_NAME: "TB_LK00", ID_FIELD: "LKA_ID" }],
        TB_VAR: [{ COD_DIM: "LKA", NUM_VAR: 1, COD_VAR: "LKA_ID", DATA_TYPE: "INTEGER" }],
      });
      locked();
      await released;
    });
    await holding;
    let settled = false;
    const importing = importFixture(services, {
      TB_DIM: [{ COD_DIM: "LKB", TABLE_NAME: "TB_LK00", ID_FIELD: "LKB_ID" }],
      TB_VAR: [{ COD_DIM: "LKB", NUM_VAR: 1, COD_VAR: "LKB_ID", DATA_TYPE: "INTEGER" }],
    }).then(
      () => null,
      (err: unknown) => err,
    );
    void importing.finally(() => {
      settled = true;
    });
    if (backend === "postgres") {
      // Wait until the import is queued behind the writer's lock (PGlite runs one transaction at a time).
      const waiting = async () =>
        (
          await services.db.query(
            `SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND objid = 724461003
               AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
          )
        ).rows.length > 0;
      for (let i = 0; i < 200 && !settled && !(await waiting()); i++) {
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
    }
    release();
    await writer;
    const err = (await importing) as MetadataError | null;
    expect(err).toBeInstanceOf(MetadataError);
    expect(err!.errors).toContainEqual({
      field: expect.stringMatching(/^TB_DIM\[\d+\]\.TABLE_NAME$/),
      message: "table TB_LK00 is used by two dimensions",
    });
    expect(await services.prisma.tbDim.findUnique({ where: { COD_DIM: "LKB" } })).toBeNull();
    expect(await columnType("TB_LK00", "LKB_ID")).toBeUndefined();
  });
});

describe.each(BACKENDS)("the sample fixture on top of the demo data set (%s)", (backend) => {
  let services: Services;
  beforeAll(async () => {
    services = await createTestServices(backend, { fixture: "demo" });
  });
  afterAll(async () => {
    await services?.close();
  });

  it("loads beside it: menus, dimensions and users of both, nothing of the demo changed", async () => {
    const before = await services.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM "TB_DOC_PO00"`);
    const summary = await importFixture(services, await readFixtureFile(SAMPLE_FIXTURE));
    expect(summary.recordsCreated).toBe(28);
    const model = services.metadata.current();
    expect([...model.dimensions.keys()].sort()).toEqual(
      ["ADDR", "CITY", "CUST", "ITEM", "LST", "ORD", "ORDL", "PO", "POL", "PRICE", "PROD", "SUPP"].sort(),
    );
    expect(model.menuByCode.has("ops") && model.menuByCode.has("erp")).toBe(true);
    const after = await services.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM "TB_DOC_PO00"`);
    expect(after.rows).toEqual(before.rows);
    const users = await services.db.query<{ USER_ID: string }>(`SELECT "USER_ID" FROM "TB_USER" ORDER BY 1`);
    expect(users.rows.map((r) => r.USER_ID)).toEqual([
      "ada",
      "anna",
      "greta",
      "kai",
      "lucia",
      "marco",
      "nora",
      "olga",
      "pietro",
      "sara",
      "sven",
    ]);
  });
});
