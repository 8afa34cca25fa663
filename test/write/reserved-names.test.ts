// Names the service or PostgreSQL keeps for itself (issue 18 §4): a metadata write that declares a
// field named like a PostgreSQL system column (ctid, xmin, ...), a table of the service, or a
// dimension named like a built-in GraphQL root field (document, vars) is 400 RESERVED_NAME before
// anything is written, never a 500 from CREATE TABLE or a schema that lost a field. The lists are
// checked against what they guard: every table the migrations create, every name the schema
// builder adds whatever the metadata.
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { buildSchema, isObjectType } from "graphql";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FIXED_TABLES, SYSTEM_COLUMNS } from "../../src/metadata/data-types.ts";
import {
  dimensionRootFields,
  FIXED_ROOT_FIELDS,
  FIXED_TYPE_NAMES,
  GENERATED_SUFFIXES,
} from "../../src/schema/names.ts";
import { printFixtureSchema } from "../../src/schema/print.ts";
import { BACKENDS, createTestApp, SAMPLE_FIXTURE, type TestApp } from "../helpers/env.ts";
import { type Client, clientFor, NO_RATE_LIMITS } from "./http.ts";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

describe("the reserved lists cover what they guard", () => {
  it("every table the migrations create is a fixed table", async () => {
    const dir = path.join(root, "prisma/migrations");
    const created = new Set<string>();
    for (const m of await readdir(dir, { withFileTypes: true })) {
      if (!m.isDirectory()) continue;
      const sql = await readFile(path.join(dir, m.name, "migration.sql"), "utf8").catch(() => "");
      for (const [, name] of sql.matchAll(/CREATE TABLE(?: IF NOT EXISTS)? "([^"]+)"/g)) created.add(name!);
    }
    expect(created.size).toBeGreaterThan(10);
    expect([...created].filter((t) => !FIXED_TABLES.has(t))).toEqual([]);
  });

  it("every type and root field the schema builder adds by itself is reserved", async () => {
    const fixture = JSON.parse(await readFile(SAMPLE_FIXTURE, "utf8"));
    const schema = buildSchema(printFixtureSchema(fixture));
    const dims: string[] = fixture.TB_DIM.map((d: { COD_DIM: string }) => d.COD_DIM);
    const byDim = (name: string) =>
      dims.some((d) => name === d || GENERATED_SUFFIXES.some((s) => name === `${d}${s}`));
    const roots = ["Query", "Mutation", "Subscription"];
    const unreserved = Object.keys(schema.getTypeMap()).filter(
      (n) => !n.startsWith("__") && !roots.includes(n) && !byDim(n) && !FIXED_TYPE_NAMES.has(n),
    );
    expect(unreserved).toEqual([]);
    for (const [rootName, fixed] of Object.entries(FIXED_ROOT_FIELDS)) {
      const rootType = schema.getType(rootName);
      if (!rootType || !isObjectType(rootType)) continue;
      const own = Object.keys(rootType.getFields()).filter(
        (f) =>
          !dims.some((d) => Object.values(dimensionRootFields(d)).some((names) => names.includes(f))) &&
          !(fixed as readonly string[]).includes(f),
      );
      expect(own, rootName).toEqual([]);
    }
  });
});

describe.each(BACKENDS)("reserved names in metadata writes (%s)", (backend) => {
  let t: TestApp;
  let anna: Client;
  const Q = "?source=erp";

  beforeAll(async () => {
    t = await createTestApp(backend, { fixture: "sample", env: NO_RATE_LIMITS });
    anna = await clientFor(t.app, "anna");
  });
  afterAll(async () => {
    await t?.close();
  });

  it("a field named like a PostgreSQL system column is 400 RESERVED_NAME, on its own and with a new dimension", async () => {
    const v0 = t.services.metadata.current().version;
    for (const name of SYSTEM_COLUMNS) {
      const res = await anna.post(`/api/v4/core/VAR${Q}`, {
        data: { COD_DIM: "CUST", NUM_VAR: 40, COD_VAR: name, DATA_TYPE: "STRING", LENGTH: 10 },
      });
      expect(res.status, name).toBe(400);
      expect(res.body, name).toMatchObject({
        code: "RESERVED_NAME",
        errors: [
          expect.objectContaining({ field: expect.stringContaining("COD_VAR"), code: "RESERVED_NAME" }),
        ],
      });
      expect(res.body.errors[0].message).toContain("system column");
    }
    const dim = await anna.post(`/api/v4/core/DIM${Q}`, {
      data: { COD_DIM: "SYSCOL", TABLE_NAME: "TB_SYSCOL", ID_FIELD: "SYSCOL_ID" },
      fields: [{ NUM_VAR: 2, COD_VAR: "xmin", DATA_TYPE: "INTEGER" }],
    });
    expect(dim.status).toBe(400);
    expect(dim.body.code).toBe("RESERVED_NAME");
    // An upper-case XMIN is another name to PostgreSQL (quoted identifiers): allowed.
    const upper = await anna.post(`/api/v4/core/VAR${Q}`, {
      data: { COD_DIM: "CUST", NUM_VAR: 41, COD_VAR: "XMIN", DATA_TYPE: "STRING", LENGTH: 10 },
    });
    expect(upper.status, JSON.stringify(upper.body)).toBe(201);
    expect(t.services.metadata.current().version).toBe(v0 + 1);
  });

  it("a dimension table named like a table of the service (any case) is 400 RESERVED_NAME", async () => {
    for (const table of ["TB_SEARCH", "tb_user", "TB_WEBHOOK_DELIVERY", "pg_x"]) {
      const res = await anna.post(`/api/v4/core/DIM${Q}`, {
        data: { COD_DIM: "CLASH", TABLE_NAME: table, ID_FIELD: "CLASH_ID" },
      });
      expect(res.status, table).toBe(400);
      expect(res.body.code, table).toBe("RESERVED_NAME");
    }
    const { rows } = await t.services.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM "TB_DIM" WHERE "COD_DIM" = 'CLASH'`,
    );
    expect(rows[0]!.n).toBe(0);
  });

  it("a dimension named like a built-in GraphQL root field is 400 RESERVED_NAME; the schema keeps working", async () => {
    for (const code of ["document", "vars", "AggregateInput", "String_comparison"]) {
      const res = await anna.post(`/api/v4/core/DIM${Q}`, {
        data: { COD_DIM: code, TABLE_NAME: `TB_R_${code}`, ID_FIELD: "R_ID" },
      });
      expect(res.status, code).toBe(400);
      expect(res.body.code, JSON.stringify(res.body)).toBe("RESERVED_NAME");
    }
    // Two dimensions whose root fields would be one (A_batch makes A_batch_create, as A does).
    const a = await anna.post(`/api/v4/core/DIM${Q}`, {
      data: { COD_DIM: "CUST_batch", TABLE_NAME: "TB_CUST_BATCH", ID_FIELD: "B_ID" },
    });
    expect(a.status).toBe(400);
    expect(a.body).toMatchObject({ code: "INVALID_METADATA" });
    expect(JSON.stringify(a.body.errors)).toContain("CUST_batch_create");
  });
});
