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
import { bumpMetadataVersion, upsertMetadataRows } from "../../src/metadata/store.ts";
import { validateMetadata } from "../../src/metadata/validate.ts";
import { printFixtureSchema } from "../../src/schema/print.ts";
import { BACKENDS, createTestApp, SAMPLE_FIXTURE, type TestApp } from "../helpers/env.ts";
import { bearer, loginAs, SAMPLE_USERS } from "../helpers/auth.ts";
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

/** Every name a plain object inherits from Object.prototype (constructor, toString, __proto__, ...). */
const PROTOTYPE_NAMES = Object.getOwnPropertyNames(Object.prototype);

describe("names a plain object inherits, in fixtures", () => {
  it("a relation name or dimension code like an Object.prototype member is a RESERVED_NAME problem", async () => {
    const fixture = JSON.parse(await readFile(SAMPLE_FIXTURE, "utf8"));
    expect(validateMetadata(fixture)).toEqual([]);
    fixture.TB_OBJECT[0].REL_NAME = "toString";
    fixture.TB_VAR[1].COD_VAR = "hasOwnProperty";
    const problems = validateMetadata(fixture);
    expect(problems).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ path: "TB_OBJECT[0].REL_NAME", code: "RESERVED_NAME" }),
        expect.objectContaining({ path: "TB_VAR[1].COD_VAR", code: "RESERVED_NAME" }),
      ]),
    );
  });
});

describe.each(BACKENDS)("names a plain object inherits (%s)", (backend) => {
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

  it("a field or dimension named like an Object.prototype member is 400 RESERVED_NAME", async () => {
    expect(PROTOTYPE_NAMES).toEqual(
      expect.arrayContaining(["constructor", "toString", "valueOf", "__proto__"]),
    );
    const v0 = t.services.metadata.current().version;
    for (const name of PROTOTYPE_NAMES) {
      const field = await anna.post(`/api/v4/core/VAR${Q}`, {
        data: { COD_DIM: "CUST", NUM_VAR: 50, COD_VAR: name, DATA_TYPE: "STRING", LENGTH: 10 },
      });
      expect(field.status, name).toBe(400);
      // __proto__ and __defineGetter__ are no valid codes anyway (a leading double underscore).
      if (name.startsWith("__")) continue;
      expect(field.body, name).toMatchObject({
        code: "RESERVED_NAME",
        errors: [
          expect.objectContaining({ field: expect.stringContaining("COD_VAR"), code: "RESERVED_NAME" }),
        ],
      });
      expect(field.body.errors[0].message, name).toContain("Object.prototype");
      const dim = await anna.post(`/api/v4/core/DIM${Q}`, {
        data: { COD_DIM: name, TABLE_NAME: "TB_PROTO_NAME", ID_FIELD: "P_ID" },
        fields: [{ NUM_VAR: 1, COD_VAR: "P_ID", DATA_TYPE: "INTEGER" }],
      });
      expect(dim.status, name).toBe(400);
      expect(dim.body.code, name).toBe("RESERVED_NAME");
    }
    expect(t.services.metadata.current().version).toBe(v0);
    // The create that omits such a field is the one it used to break: it still works.
    const created = await anna.post(`/api/v4/core/CUST${Q}`, { data: { NAME: "Proto-free" } });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    // Codes are case-sensitive, as JavaScript's names are: CONSTRUCTOR is another name.
    const upper = await anna.post(`/api/v4/core/VAR${Q}`, {
      data: { COD_DIM: "CUST", NUM_VAR: 51, COD_VAR: "CONSTRUCTOR", DATA_TYPE: "STRING", LENGTH: 10 },
    });
    expect(upper.status, JSON.stringify(upper.body)).toBe(201);
  });

  it("a create or update whose data names Object.prototype members is 400 INVALID_FIELD; nothing is polluted", async () => {
    for (const name of ["constructor", "toString", "valueOf", "hasOwnProperty"]) {
      const res = await anna.post(`/api/v4/core/CUST${Q}`, { data: { NAME: "P", [name]: "x" } });
      expect(res.status, name).toBe(400);
      expect(res.body, name).toMatchObject({ code: "INVALID_FIELD", field: name });
    }
    // A raw `__proto__` member (JSON.parse keeps it as an own key) is refused, not merged.
    const raw = await t.app.inject({
      method: "POST",
      url: `/api/v4/core/CUST${Q}`,
      headers: { ...(await bearerOf(t, "anna")), "content-type": "application/json" },
      payload:
        '{"data":{"NAME":"P","__proto__":{"INTERNAL":"polluted","isAdmin":true},"constructor":{"x":1}}}',
    });
    expect(raw.statusCode, raw.body).toBe(400);
    expect(["INVALID_FIELD", "INVALID_JSON"]).toContain(raw.json().code);
    expect(({} as Record<string, unknown>).isAdmin).toBeUndefined();
    expect(({} as Record<string, unknown>).INTERNAL).toBeUndefined();
    // GraphQL: a create's input object takes no such member either (not a 500).
    const gql = await t.app.inject({
      method: "POST",
      url: "/graphql",
      headers: { ...(await bearerOf(t, "anna")), "content-type": "application/json" },
      payload: JSON.stringify({
        query: `mutation { CUST_create(source: "erp", data: { NAME: "G", constructor: "x" }) { record { CUST_ID } } }`,
      }),
    });
    expect(gql.statusCode).toBeLessThan(500);
    expect(JSON.stringify(gql.json().errors)).toContain("constructor");
  });
});

describe.each(BACKENDS)("fields named like Object.prototype members already stored (%s)", (backend) => {
  let t: TestApp;
  let anna: Client;
  const Q = "?source=erp";

  beforeAll(async () => {
    t = await createTestApp(backend, { fixture: "sample", env: NO_RATE_LIMITS });
    anna = await clientFor(t.app, "anna");
    // Metadata written before the rule above: the rows and columns straight into the database.
    const names = ["constructor", "valueOf", "toString"];
    await t.services.db.transaction(async (tx) => {
      await upsertMetadataRows(tx, {
        TB_VAR: names.map((name, i) => ({
          COD_DIM: "CUST",
          NUM_VAR: 60 + i,
          COD_VAR: name,
          DESC_VAR: name,
          DATA_TYPE: "STRING",
          LENGTH: 20,
          NULLABLE: true,
          TIPO_CAMPO: null,
          TIPO_VAR: null,
        })) as never,
        TB_COST: names.map((name, i) => ({
          COD_DIM: "CUST",
          NUM_COST: 60 + i,
          COD_VAR: name,
          COD_ON_OFF: "LDRNM",
          REQUIRED: false,
        })) as never,
      });
      for (const name of names)
        await tx.query(`ALTER TABLE "TB_ANAG_CUST00" ADD COLUMN "${name}" varchar(20)`);
      await bumpMetadataVersion(tx);
    });
    await t.services.metadata.refresh(true);
    expect(t.services.metadata.current().dimensions.get("CUST")!.fieldsByCode.has("constructor")).toBe(true);
  });
  afterAll(async () => {
    await t?.close();
  });

  it("a create or update that omits them reads no inherited value: stored as null", async () => {
    const created = await anna.post(`/api/v4/core/CUST${Q}`, { data: { NAME: "Omits them" } });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const id = created.body.data?.CUST_ID ?? created.body.CUST_ID ?? created.body.record?.CUST_ID;
    expect(id).toBeDefined();
    const { rows } = await t.services.db.query<Record<string, unknown>>(
      `SELECT "constructor", "valueOf", "toString" FROM "TB_ANAG_CUST00" WHERE "CUST_ID" = $1`,
      [id],
    );
    expect(rows).toEqual([{ constructor: null, valueOf: null, toString: null }]);
    const given = await anna.post(`/api/v4/core/CUST${Q}`, { data: { NAME: "Gives one", valueOf: "v" } });
    expect(given.status, JSON.stringify(given.body)).toBe(201);
    const patched = await anna.patch(`/api/v4/core/CUST/${id}${Q}`, { data: { NAME: "Renamed" } });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    const put = await anna.put(`/api/v4/core/CUST/${id}${Q}`, { data: { NAME: "Put", toString: "t" } });
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    const after = await t.services.db.query<Record<string, unknown>>(
      `SELECT "NAME", "constructor", "valueOf", "toString" FROM "TB_ANAG_CUST00" WHERE "CUST_ID" = $1`,
      [id],
    );
    expect(after.rows).toEqual([{ NAME: "Put", constructor: null, valueOf: null, toString: "t" }]);
  });
});

async function bearerOf(t: TestApp, user: "anna"): Promise<Record<string, string>> {
  const { username, password } = SAMPLE_USERS[user];
  return bearer(await loginAs(t.app, username, password));
}
