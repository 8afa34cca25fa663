// Fixes from the review of the write path: /core/batch references limited to what the caller sees,
// soft deletes in /core/batch shaped like the single DELETE, ids the database cannot hold, deeply
// nested JSON, templated ids that meet a taken value, required STRING ids, peso-hidden fields on
// write, DECIMAL scale and precision, and batches that lock their rows in a stable order.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { batchDelete, batchUpdate } from "../../src/resolvers/write/batch.ts";
import { runCoreBatch } from "../../src/resolvers/write/core-batch.ts";
import { createOne, deleteOne, updateOne } from "../../src/resolvers/write/operations.ts";
import { toColumnValue } from "../../src/resolvers/write/values.ts";
import type { FieldDef } from "../../src/types.ts";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";
import { contextFor, row, sampleFixtureWith } from "./helpers.ts";
import { type Client, clientFor, NO_RATE_LIMITS } from "./http.ts";

const CORE = "/api/v4/core";

/** The sample with lucia (peso 3) allowed to write customers, and a TAG dimension whose STRING id
 * is neither required nor templated. */
function fixture() {
  return sampleFixtureWith((f) => {
    const lucia = f.users!.find((u) => u.user_id === "lucia")!;
    lucia.grants = [{ COD_MENU: "anag-1", OPERATIONS: ["read", "write"], LEVEL: 3 }];
    f.TB_DIM!.push({ COD_DIM: "TAG", DESC_DIM: "Tags", TABLE_NAME: "TB_TEST_TAG00", ID_FIELD: "TAG_ID" });
    f.TB_VAR!.push(
      { COD_DIM: "TAG", NUM_VAR: 1, COD_VAR: "TAG_ID", DATA_TYPE: "STRING", LENGTH: 36, NULLABLE: false },
      { COD_DIM: "TAG", NUM_VAR: 2, COD_VAR: "LABEL", DATA_TYPE: "STRING", LENGTH: 40 },
    );
    f.TB_COST!.push({ COD_DIM: "TAG", NUM_COST: 1, COD_VAR: "TAG_ID", COD_ON_OFF: "LDRN", REQUIRED: false });
  });
}

/** `leaf` inside `depth` nested arrays ([[leaf]] has depth 2). */
function nest(depth: number, leaf: unknown = "x"): unknown {
  let v = leaf;
  for (let i = 0; i < depth; i++) v = [v];
  return v;
}

/** The innermost value of nest(). */
function innermost(v: unknown): unknown {
  let cur = v;
  while (Array.isArray(cur)) cur = cur[0];
  return cur;
}

const FIELD_MAX_BYTES = 1024 * 1024;

describe.each(BACKENDS)("review fixes of the write path (%s)", (backend) => {
  let t: TestApp;
  let anna: Client;
  let marco: Client;
  let lucia: Client;
  const CUST = `${CORE}/CUST`;
  const q = "?source=anag-1";

  beforeAll(async () => {
    t = await createTestApp(backend, { fixture: await fixture(), env: NO_RATE_LIMITS });
    [anna, marco, lucia] = await Promise.all([
      clientFor(t.app, "anna"),
      clientFor(t.app, "marco"),
      clientFor(t.app, "lucia"),
    ]);
  });
  afterAll(async () => {
    await t?.close();
  });

  async function newCustomer(data: Record<string, unknown> = {}): Promise<number> {
    const res = await anna.post(`${CUST}${q}`, { data: { NAME: "Review Srl", ...data } });
    expect(res.status).toBe(201);
    return res.body.data.CUST_ID as number;
  }

  function field(dim: string, code: string): FieldDef {
    return t.services.metadata.current().dimensions.get(dim)!.fieldsByCode.get(code)!;
  }

  async function count(table: string): Promise<number> {
    const res = await t.services.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${table}"`);
    return Number(res.rows[0]!.n);
  }

  describe("/core/batch references (#1)", () => {
    it("refuses a reference to a field the caller cannot see (no D, R only, hidden by peso) like a missing one", async () => {
      const id = await newCustomer({ EMAIL: "ref@example.com" });
      await t.services.db.query(
        `UPDATE "TB_ANAG_CUST00" SET "INTERNAL" = 'top-secret', "RISK_SCORE" = 4242 WHERE "CUST_ID" = $1`,
        [id],
      );
      const copy = (client: Client, from: string, into: string) =>
        client.post(`${CORE}/batch${q}`, {
          operations: [
            // (A PATCH must change a field: an empty one is 400, write-bodies.test.ts.)
            { method: "PATCH", dim: "CUST", id, data: { NAME: "Review Srl" }, ref: "a" },
            { method: "PATCH", dim: "CUST", id, data: { [into]: from } },
          ],
        });
      const missing = await copy(marco, "@{a.NOPE}", "SALES_REP");
      expect(missing.status).toBe(400);
      expect(missing.body).toMatchObject({ code: "INVALID_REFERENCE", details: { operation: 1 } });
      for (const [client, name, into] of [
        [marco, "INTERNAL", "SALES_REP"],
        [marco, "RISK_SCORE", "SALES_REP"],
        [lucia, "CREDIT_LIMIT", "NAME"],
      ] as const) {
        const res = await copy(client, `@{a.${name}}`, into);
        expect(res.status).toBe(400);
        expect(res.body).toMatchObject({ code: "INVALID_REFERENCE", status: 400, details: { operation: 1 } });
        // The same answer as for a field that does not exist: nothing tells them apart.
        expect(res.body.message).toBe(missing.body.message.replaceAll("NOPE", name));
        expect(JSON.stringify(res.body)).not.toMatch(/top-secret|4242|120000|50000/);
      }
      const stored = await row(t.services, "TB_ANAG_CUST00", "CUST_ID", id);
      expect(stored).toMatchObject({ SALES_REP: null, NAME: "Review Srl", TREC: "N" });
    });

    it("resolves the id, audit fields and fields visible in detail (D), also deep in data", async () => {
      const id = await newCustomer({ EMAIL: "seen@example.com" });
      const other = await newCustomer();
      const res = await marco.post(`${CORE}/batch${q}`, {
        operations: [
          { method: "PATCH", dim: "CUST", id, data: { NOTES: "touched" }, ref: "a" },
          { method: "PATCH", dim: "CUST", id: other, data: { SALES_REP: "@{a.NAME}", NOTES: "@{a.EMAIL}" } },
          {
            method: "POST",
            dim: "ADDR",
            source: "anag-2",
            data: { CUST_ID: "@{a.CUST_ID}", KIND: "@{a.LOWNER}", STREET: "@{a.TREC}" },
          },
        ],
      });
      expect(res.status).toBe(200);
      expect(await row(t.services, "TB_ANAG_CUST00", "CUST_ID", other)).toMatchObject({
        SALES_REP: "Review Srl",
        NOTES: "seen@example.com",
      });
      const addr = await row(t.services, "TB_ANAG_ADDR00", "ADDR_ID", res.body.results[2].id);
      expect(addr).toMatchObject({ CUST_ID: expect.anything(), KIND: "marco", STREET: "M" });
      expect(Number(addr!.CUST_ID)).toBe(id);

      // Deep in a JSON value (resolved without recursion).
      const deep = await runCoreBatch(t.services, contextFor("anna", "catalog-1"), {
        operations: [
          { method: "POST", dim: "PROD", data: { NAME: "Deep ref", UNIT_PRICE: 1 }, ref: "p" },
          { method: "PATCH", dim: "PROD", id: "@{p}", data: { SPECS: nest(50, "@{p.NAME}") } },
        ],
      });
      const prod = await row(t.services, "TB_ANAG_PROD00", "PROD_ID", deep[0]!.result.recordId);
      expect(innermost(prod!.SPECS)).toBe("Deep ref");
    });
  });

  it("a soft DELETE inside /core/batch answers only the id and audit fields, like the single DELETE", async () => {
    const a = await newCustomer({ EMAIL: "a@example.com", NOTES: "n" });
    const b = await newCustomer({ EMAIL: "b@example.com", NOTES: "n" });
    const batch = await anna.post(`${CORE}/batch${q}`, {
      operations: [{ method: "DELETE", dim: "CUST", id: a }],
    });
    const single = await anna.delete(`${CUST}/${b}${q}`);
    expect([batch.status, single.status]).toEqual([200, 200]);
    const fromBatch = batch.body.results[0].data;
    expect(Object.keys(fromBatch).sort()).toEqual(Object.keys(single.body.data).sort());
    expect(fromBatch).toMatchObject({ CUST_ID: a, TREC: "C", LOWNER: "anna" });
    expect(fromBatch).not.toHaveProperty("NAME");
    expect(fromBatch).not.toHaveProperty("EMAIL");
    expect((await row(t.services, "TB_ANAG_CUST00", "CUST_ID", a))?.TREC).toBe("C");
  });

  describe("parameters a single-record write would not read (exploratory test, finding 2)", () => {
    const refusal = (field: string, message: string) => ({
      error: "BadRequest",
      code: "INVALID_PARAMETER",
      status: 400,
      field,
      message,
    });
    const readParameter = (name: string, forceToo = false) =>
      `${name} is a read parameter; a write of one record names its record by the path, carries its values in the body and answers the record as written, so its query string takes only source and the context parameters center_dett, ambiente, modulo, microservice${forceToo ? ", and force" : ""}.`;

    it("a DELETE's body naming force (or any member but the scope) is 400, and nothing is deleted", async () => {
      const id = await newCustomer();
      // The body's members are checked as every write body's (INVALID_REQUEST, write-bodies.test.ts).
      const bodyRefusal = (field: string, message: string) => ({
        ...refusal(field, message),
        code: "INVALID_REQUEST",
      });
      const force = await anna.delete(`${CUST}/${id}${q}`, { force: true });
      expect(force.status).toBe(400);
      expect(force.body).toEqual(
        bodyRefusal(
          "force",
          "force is not a member of a DELETE body, which takes source, center_dett; it would not be read. A DELETE's force goes in its query string (?force=true, spec 4.3), not in its body.",
        ),
      );
      const other = await anna.delete(`${CUST}/${id}${q}`, { ids: [id] });
      expect(other.body).toEqual(
        bodyRefusal(
          "ids",
          "ids is not a member of a DELETE body, which takes source, center_dett; it would not be read.",
        ),
      );
      expect((await row(t.services, "TB_ANAG_CUST00", "CUST_ID", id))?.TREC).toBe("N");
      // The scope may come in the body (spec 4.1), and force in the query string deletes for good.
      const scoped = await anna.delete(`${CUST}/${id}?force=true`, { source: "anag-1" });
      expect(scoped.status).toBe(200);
      expect(await row(t.services, "TB_ANAG_CUST00", "CUST_ID", id)).toBeUndefined();
    });

    it("list and read parameters on POST, PUT, PATCH and DELETE of one record are 400 naming them", async () => {
      const id = await newCustomer({ EMAIL: "params@example.com" });
      const cases: Array<[string, () => Promise<{ status: number; body: unknown }>, string, boolean]> = [
        ["$num_rows", () => anna.delete(`${CUST}/${id}${q}&$num_rows=1`), "$num_rows", true],
        [
          "filter[NAME]",
          () => anna.patch(`${CUST}/${id}${q}&filter[NAME]=Nobody`, { data: { NAME: "Filtered" } }),
          "filter[…]",
          false,
        ],
        [
          "$fields",
          () => anna.post(`${CUST}${q}&$fields=NAME`, { data: { NAME: "Fields Srl" } }),
          "$fields",
          false,
        ],
        [
          "$expand",
          () => anna.post(`${CUST}${q}&$expand=CITY_ID`, { data: { NAME: "Expand Srl" } }),
          "$expand",
          false,
        ],
        ["sort", () => anna.put(`${CUST}/${id}${q}&sort=NAME`, { data: { NAME: "Sorted" } }), "sort", false],
        ["cond_trec", () => anna.delete(`${CUST}/${id}${q}&cond_trec=C`), "cond_trec", true],
      ];
      for (const [field, send, shown, forceToo] of cases) {
        const res = await send();
        expect(res.status, field).toBe(400);
        expect(res.body, field).toEqual(refusal(field, readParameter(shown, forceToo)));
      }
      // An unknown $ name and a bracketed form are refused as on reads.
      const unknown = await anna.patch(`${CUST}/${id}${q}&$nope=1`, { data: { NAME: "Nope" } });
      expect(unknown.body).toEqual(refusal("$nope", "Unknown query parameter $nope."));
      // Nothing was written or created.
      expect(await row(t.services, "TB_ANAG_CUST00", "CUST_ID", id)).toMatchObject({
        NAME: "Review Srl",
        TREC: "N",
      });
      const created = await anna.get(`${CUST}/count${q}&filter[NAME][$in]=Fields Srl,Expand Srl`);
      expect(created.body.count).toBe(0);
      // The context parameters and DELETE's force are still taken.
      const patched = await anna.patch(`${CUST}/${id}${q}&center_dett=HQ`, { data: { NAME: "Renamed" } });
      expect(patched.status).toBe(200);
      expect((await anna.delete(`${CUST}/${id}${q}&force=false`)).status).toBe(200);
    });
  });

  describe("ids the database cannot hold (#6)", () => {
    it("answers 404 RECORD_NOT_FOUND for a NUL, an unpaired surrogate or an id longer than the field", async () => {
      for (const method of ["patch", "put", "delete"] as const) {
        const res =
          method === "delete"
            ? await anna.delete(`${CORE}/CITY/a%00b?source=anag-3`)
            : await anna[method](`${CORE}/CITY/a%00b?source=anag-3`, { data: { NAME: "x", COUNTRY: "IT" } });
        expect(res.status).toBe(404);
        expect(res.body).toMatchObject({ code: "RECORD_NOT_FOUND", status: 404 });
      }
      const ctx = contextFor("anna", "anag-3");
      for (const id of ["a\ud800b", "\udc00", "a\u0000", "X".repeat(11)]) {
        await expect(updateOne(t.services, ctx, "CITY", id, { NAME: "x" }, "patch")).rejects.toMatchObject({
          code: "RECORD_NOT_FOUND",
          status: 404,
        });
        await expect(deleteOne(t.services, ctx, "CITY", id, false)).rejects.toMatchObject({
          code: "RECORD_NOT_FOUND",
        });
      }
    });

    it("batches record a per-item failure and carry on; /core/batch answers 404", async () => {
      for (const city of ["Z1", "Z2", "Z3"]) {
        const res = await anna.post(`${CORE}/CITY?source=anag-3`, {
          data: { CITY_ID: city, NAME: city, COUNTRY: "IT" },
        });
        expect(res.status).toBe(201);
      }
      const del = await anna.post(`${CORE}/CITY/batch-delete?source=anag-3`, {
        ids: ["Z1", "a\u0000b", "\ud800x", "Z2"],
      });
      expect(del.status).toBe(200);
      expect(del.body).toMatchObject({ success: 2, failed: 2 });
      expect(del.body.results.map((r: { status: string }) => r.status)).toEqual([
        "deleted",
        "failed",
        "failed",
        "deleted",
      ]);
      expect(del.body.results[1].error).toMatchObject({ code: "RECORD_NOT_FOUND", status: 404 });
      expect(del.body.results[2].error).toMatchObject({ code: "RECORD_NOT_FOUND", status: 404 });
      expect((await row(t.services, "TB_ANAG_CITY00", "CITY_ID", "Z1"))?.TREC).toBe("C");
      expect((await row(t.services, "TB_ANAG_CITY00", "CITY_ID", "Z2"))?.TREC).toBe("C");

      const patch = await anna.patch(`${CORE}/CITY/batch?source=anag-3`, {
        data: [
          { id: "a\u0000b", NAME: "x" },
          { id: "Z3", NAME: "Zeta" },
        ],
      });
      expect(patch.status).toBe(200);
      expect(patch.body).toMatchObject({ success: 1, failed: 1 });
      expect(patch.body.results[0].error).toMatchObject({ code: "RECORD_NOT_FOUND" });
      expect((await row(t.services, "TB_ANAG_CITY00", "CITY_ID", "Z3"))?.NAME).toBe("Zeta");

      const core = await anna.post(`${CORE}/batch?source=anag-3`, {
        operations: [
          { method: "PATCH", dim: "CITY", id: "Z3", data: { NAME: "Rolled back" } },
          { method: "DELETE", dim: "CITY", id: "a\u0000" },
        ],
      });
      expect(core.status).toBe(404);
      expect(core.body).toMatchObject({ code: "RECORD_NOT_FOUND", details: { operation: 1 } });
      expect((await row(t.services, "TB_ANAG_CITY00", "CITY_ID", "Z3"))?.NAME).toBe("Zeta");
    });
  });

  describe("deeply nested JSON values (#7)", () => {
    it("toColumnValue takes JSON and MEDIA values up to 64 levels and refuses deeper ones naming the field", () => {
      const specs = field("PROD", "SPECS");
      const image = field("PROD", "IMAGE");
      expect(JSON.parse(toColumnValue(specs, nest(64), FIELD_MAX_BYTES) as string)).toEqual(nest(64));
      expect(toColumnValue(image, { file_id: "f", meta: nest(63) }, FIELD_MAX_BYTES)).toBeTypeOf("string");
      for (const [f, value] of [
        [specs, nest(65)],
        [specs, nest(5000)],
        [specs, { a: { b: nest(100_000) } }],
        [image, { file_id: "f", meta: nest(64) }],
      ] as const) {
        expect(() => toColumnValue(f, value, FIELD_MAX_BYTES)).toThrowError(
          expect.objectContaining({
            code: "INVALID_FIELD_VALUE",
            status: 400,
            field: f.code,
          }),
        );
      }
    });

    it("a create and a /core/batch with 100 000 levels answer 400 INVALID_FIELD_VALUE and write nothing", async () => {
      const ctx = contextFor("anna", "catalog-1");
      const before = await count("TB_ANAG_PROD00");
      await expect(
        createOne(t.services, ctx, "PROD", { NAME: "n", UNIT_PRICE: 1, SPECS: nest(5000) }),
      ).rejects.toMatchObject({ code: "INVALID_FIELD_VALUE", status: 400, field: "SPECS" });
      await expect(
        runCoreBatch(t.services, ctx, {
          operations: [
            { method: "POST", dim: "PROD", data: { NAME: "n", UNIT_PRICE: 1 }, ref: "p" },
            { method: "POST", dim: "PROD", data: { NAME: "n", UNIT_PRICE: 1, SPECS: nest(100_000, "@{p}") } },
          ],
        }),
      ).rejects.toMatchObject({ code: "INVALID_FIELD_VALUE", status: 400, field: "SPECS" });
      expect(await count("TB_ANAG_PROD00")).toBe(before);
    });
  });

  it("a templated id skips values already taken in the tenant (#8)", async () => {
    const seq = async () =>
      Number(
        (
          await t.services.db.query<{ VALUE: number }>(
            `SELECT "VALUE" FROM "TB_SEQUENCE" WHERE "TENANT_ID" = 'acme' AND "SEQ_NAME" = 'PROD'`,
          )
        ).rows[0]!.VALUE,
      );
    const code = (n: number) => `P${String(n).padStart(4, "0")}`;
    const n = await seq();
    const post = (data: Record<string, unknown>) =>
      anna.post(`${CORE}/PROD?source=catalog-1`, { data: { NAME: "n", UNIT_PRICE: 1, ...data } });

    expect((await post({ PROD_ID: code(n + 1) })).status).toBe(201);
    const next = await post({});
    expect(next.status).toBe(201);
    expect(next.body.data.PROD_ID).toBe(code(n + 2));

    // Two taken in a row: the template is drawn again until a free value comes.
    expect((await post({ PROD_ID: code(n + 3) })).status).toBe(201);
    expect((await post({ PROD_ID: code(n + 4) })).status).toBe(201);
    const after = await post({});
    expect(after.status).toBe(201);
    expect(after.body.data.PROD_ID).toBe(code(n + 5));
    expect(await seq()).toBe(n + 5);
    expect((await row(t.services, "TB_ANAG_PROD00", "PROD_ID", code(n + 5)))?.NAME).toBe("n");
  });

  describe("STRING ids (#9)", () => {
    it("a required STRING id left out is 422 REQUIRED_FIELD_MISSING naming it", async () => {
      const before = await count("TB_ANAG_CITY00");
      const res = await anna.post(`${CORE}/CITY?source=anag-3`, { data: { NAME: "Nowhere", COUNTRY: "IT" } });
      expect(res.status).toBe(422);
      expect(res.body).toMatchObject({ code: "REQUIRED_FIELD_MISSING", field: "CITY_ID", status: 422 });
      expect(await count("TB_ANAG_CITY00")).toBe(before);
    });

    it("a STRING id neither required nor templated still gets a UUID", async () => {
      const res = await anna.post(`${CORE}/TAG?source=erp`, { data: { LABEL: "x" } });
      expect(res.status).toBe(201);
      expect(res.body.data.TAG_ID).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
      expect((await row(t.services, "TB_TEST_TAG00", "TAG_ID", res.body.data.TAG_ID))?.LABEL).toBe("x");
    });
  });

  it("a field hidden by peso behaves on write as if its flag were absent (#16)", async () => {
    const id = await newCustomer({ CREDIT_LIMIT: 700 });
    const create = await lucia.post(`${CUST}${q}`, { data: { NAME: "Lucia Srl", CREDIT_LIMIT: 5 } });
    expect(create.status).toBe(400);
    expect(create.body).toMatchObject({
      code: "FIELD_NOT_ALLOWED_ON_CREATE",
      error: "FieldNotAllowedOnCreate",
      field: "CREDIT_LIMIT",
    });
    for (const method of ["patch", "put"] as const) {
      const res = await lucia[method](`${CUST}/${id}${q}`, { data: { NAME: "Lucia", CREDIT_LIMIT: 5 } });
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({
        code: "FIELD_NOT_MODIFIABLE",
        error: "FieldNotModifiable",
        field: "CREDIT_LIMIT",
      });
    }
    const unknown = await lucia.patch(`${CUST}/${id}${q}`, { data: { NOPE: 1 } });
    expect(unknown.status).toBe(400);
    expect(unknown.body).toMatchObject({ code: "INVALID_FIELD", field: "NOPE" });
    // A PUT without the field leaves it alone: lucia cannot clear what she cannot see.
    const put = await lucia.put(`${CUST}/${id}${q}`, { data: { NAME: "Lucia" } });
    expect(put.status).toBe(200);
    expect(put.body.data).not.toHaveProperty("CREDIT_LIMIT");
    const stored = await row(t.services, "TB_ANAG_CUST00", "CUST_ID", id);
    expect(Number(stored!.CREDIT_LIMIT)).toBe(700);
    expect(stored!.NAME).toBe("Lucia");
  });

  describe("DECIMAL scale and precision (#17)", () => {
    it("refuses more decimals than DECIMALS and more digits than LENGTH - DECIMALS, naming the field", async () => {
      const id = await newCustomer();
      for (const value of [1.239, 9999999999.999, 12345678901, 1e21, 1e-7, 0.30000000000000004]) {
        const create = await anna.post(`${CUST}${q}`, { data: { NAME: "D", CREDIT_LIMIT: value } });
        expect(create.status).toBe(400);
        expect(create.body).toMatchObject({ code: "INVALID_FIELD_VALUE", field: "CREDIT_LIMIT" });
        const patch = await anna.patch(`${CUST}/${id}${q}`, { data: { CREDIT_LIMIT: value } });
        expect(patch.status).toBe(400);
        expect(patch.body).toMatchObject({ code: "INVALID_FIELD_VALUE", field: "CREDIT_LIMIT" });
      }
      expect((await row(t.services, "TB_ANAG_CUST00", "CUST_ID", id))?.CREDIT_LIMIT).toBeNull();
      for (const [value, stored] of [
        [9999999999.99, "9999999999.99"],
        [-9999999999.99, "-9999999999.99"],
        [1.2, "1.20"],
        [0.05, "0.05"],
      ] as const) {
        const res = await anna.patch(`${CUST}/${id}${q}`, { data: { CREDIT_LIMIT: value } });
        expect(res.status).toBe(200);
        const text = await t.services.db.query<{ v: string }>(
          `SELECT "CREDIT_LIMIT"::text AS v FROM "TB_ANAG_CUST00" WHERE "CUST_ID" = $1`,
          [id],
        );
        expect(text.rows[0]!.v).toBe(stored);
      }
    });

    it("counts digits on the shortest decimal form, exponent notation included", () => {
      const base = field("CUST", "CREDIT_LIMIT");
      const small: FieldDef = { ...base, length: 8, decimals: 7 };
      expect(toColumnValue(small, 1e-7, FIELD_MAX_BYTES)).toBe(1e-7);
      expect(toColumnValue(small, 0.1234567, FIELD_MAX_BYTES)).toBe(0.1234567);
      expect(toColumnValue(small, -9.9999999, FIELD_MAX_BYTES)).toBe(-9.9999999);
      const whole: FieldDef = { ...base, length: 22, decimals: 0 };
      expect(toColumnValue(whole, 1e21, FIELD_MAX_BYTES)).toBe(1e21);
      for (const [f, value] of [
        [small, 1e-8],
        [small, 1.5e-7],
        [small, 10],
        [whole, 1e22],
        [whole, 0.5],
      ] as const) {
        expect(() => toColumnValue(f, value, FIELD_MAX_BYTES)).toThrowError(
          expect.objectContaining({ code: "INVALID_FIELD_VALUE", field: "CREDIT_LIMIT" }),
        );
      }
    });
  });

  // Two batches over the same records in opposite orders: each locks the whole set up front in id
  // order, so the second waits for the first instead of deadlocking (40P01). Only a database with
  // several connections can run them at once.
  if (backend === "postgres") {
    it("10 rounds of two concurrent reversed-order PATCH batches and batch-deletes all succeed (#4)", async () => {
      const ctx = contextFor("anna", "anag-1");
      const ids: number[] = [];
      for (let i = 0; i < 6; i++) ids.push(await newCustomer({ NAME: `Lock ${i}` }));
      for (let round = 0; round < 10; round++) {
        const [a, b] = await Promise.all([
          batchUpdate(
            t.services,
            ctx,
            "CUST",
            ids.map((id) => ({ id, NOTES: `a${round}` })),
          ),
          batchUpdate(
            t.services,
            ctx,
            "CUST",
            [...ids].reverse().map((id) => ({ id, NOTES: `b${round}` })),
          ),
        ]);
        expect([a.success, a.failed, b.success, b.failed]).toEqual([6, 0, 6, 0]);
        // Results stay in request order.
        expect(b.results.map((r) => r.id)).toEqual([...ids].reverse());
      }
      for (let round = 0; round < 10; round++) {
        const doomed: number[] = [];
        for (let i = 0; i < 4; i++) doomed.push(await newCustomer({ NAME: `Doomed ${i}` }));
        const [a, b] = await Promise.all([
          batchDelete(t.services, ctx, "CUST", doomed, false),
          batchDelete(t.services, ctx, "CUST", [...doomed].reverse(), false),
        ]);
        // Each record is cancelled once; the other batch finds it cancelled already.
        expect(a.success + b.success).toBe(4);
        expect(a.failed + b.failed).toBe(4);
        const failures = [...a.results, ...b.results].filter((r) => r.status === "failed");
        expect(failures.every((r) => r.error?.code === "INVALID_STATE_TRANSITION")).toBe(true);
        for (const id of doomed)
          expect((await row(t.services, "TB_ANAG_CUST00", "CUST_ID", id))?.TREC).toBe("C");
      }
    });

    it("10 rounds of two concurrent reversed-order /core/batch requests over two dimensions all succeed (#4)", async () => {
      const ctx = contextFor("anna", "anag");
      const ids: number[] = [];
      for (let i = 0; i < 4; i++) ids.push(await newCustomer({ NAME: `Core lock ${i}` }));
      const ops = (tag: string) => [
        ...ids.map((id) => ({ method: "PATCH", dim: "CUST", id, data: { NOTES: tag } })),
        { method: "PATCH", dim: "CITY", id: "RM", data: { NAME: `Roma ${tag}` } },
      ];
      for (let round = 0; round < 10; round++) {
        const results = await Promise.all([
          runCoreBatch(t.services, ctx, { operations: ops(`f${round}`) }),
          runCoreBatch(t.services, ctx, { operations: ops(`r${round}`).reverse() }),
        ]);
        expect(results.map((r) => r.length)).toEqual([5, 5]);
        // Results stay in request order.
        expect(results[1]!.map((r) => r.result.recordId)).toEqual(["RM", ...[...ids].reverse()]);
      }
      const notes = await t.services.db.query<{ NOTES: string }>(
        `SELECT DISTINCT "NOTES" FROM "TB_ANAG_CUST00" WHERE "CUST_ID" = ANY($1)`,
        [ids],
      );
      // Each batch ran whole, one after the other: all four records carry the same batch's tag.
      expect(notes.rows).toHaveLength(1);
    });
  }
});
