// HTTP: POST, PUT, PATCH, DELETE of one record: response bodies, field rules, required fields,
// types and lengths, foreign keys, pre-insert templates, PUT clearing, deletes and grants.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, loginAs } from "../helpers/auth.ts";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";
import { lastOutboxId, outboxRows, row, sampleFixtureWith } from "./helpers.ts";
import { type Client, client, clientFor, NO_RATE_LIMITS } from "./http.ts";

const TEMPLATES: Array<[string, string, number | null, string]> = [
  ["NOW_AT", "TIMESTAMP", null, "{now}"],
  ["TODAY", "DATE", null, "{today}"],
  ["YEAR_TXT", "STRING", 4, "{year}"],
  ["USER_TXT", "STRING", 100, "{user}"],
  ["TENANT_TXT", "STRING", 50, "{tenant}"],
  ["SOURCE_TXT", "STRING", 60, "{source}"],
  ["CENTRO_TXT", "STRING", 50, "{centro_dett}"],
  ["AMBIENTE_TXT", "STRING", 50, "{ambiente}"],
  ["UUID_TXT", "STRING", 36, "{uuid}"],
  ["PLAIN_SEQ", "STRING", 20, "{seq:TPLPLAIN}"],
  ["CODE", "STRING", 60, "{field:NAME}/{year}/{seq:TPL:4}"],
  ["FIXED", "STRING", 10, "LIT"],
];

/** The sample plus a TPL dimension with one field per template placeholder. */
function withTemplateDimension() {
  return sampleFixtureWith((f) => {
    f.TB_DIM!.push({
      COD_DIM: "TPL",
      DESC_DIM: "Templates",
      TABLE_NAME: "TB_TEST_TPL00",
      ID_FIELD: "TPL_ID",
    });
    f.TB_VAR!.push(
      { COD_DIM: "TPL", NUM_VAR: 1, COD_VAR: "TPL_ID", DATA_TYPE: "INTEGER", NULLABLE: false },
      { COD_DIM: "TPL", NUM_VAR: 2, COD_VAR: "NAME", DATA_TYPE: "STRING", LENGTH: 40 },
    );
    TEMPLATES.forEach(([code, type, length, template], i) => {
      f.TB_VAR!.push({ COD_DIM: "TPL", NUM_VAR: 3 + i, COD_VAR: code, DATA_TYPE: type, LENGTH: length });
      f.TB_COST!.push({
        COD_DIM: "TPL",
        NUM_COST: 3 + i,
        COD_VAR: code,
        COD_ON_OFF: "LDRNM",
        VALUE_TEMP: template,
      });
    });
  });
}

describe.each(BACKENDS)("record writes over HTTP (%s)", (backend) => {
  let t: TestApp;
  let anna: Client;
  let marco: Client;
  let lucia: Client;
  let greta: Client;
  const CUST = "/api/v4/core/CUST";
  const q = "?source=anag-1";

  beforeAll(async () => {
    t = await createTestApp(backend, { fixture: await withTemplateDimension(), env: NO_RATE_LIMITS });
    [anna, marco, lucia, greta] = await Promise.all([
      clientFor(t.app, "anna"),
      clientFor(t.app, "marco"),
      clientFor(t.app, "lucia"),
      clientFor(t.app, "greta"),
    ]);
  });
  afterAll(async () => {
    await t?.close();
  });

  async function newCustomer(data: Record<string, unknown> = {}) {
    const res = await anna.post(`${CUST}${q}`, { data: { NAME: "Test Srl", ...data } });
    expect(res.status).toBe(201);
    return res.body.data.CUST_ID as number;
  }

  describe("create", () => {
    it("answers 201 with the record, audit fields, message and event_id; system fields in the body are ignored", async () => {
      const last = await lastOutboxId(t.services);
      const res = await anna.post(`${CUST}${q}`, {
        data: {
          NAME: "Verdi SpA",
          CITY_ID: "MI",
          EMAIL: "v@verdi.example",
          VIP: true,
          TREC: "P",
          OWNER: "mallory",
        },
      });
      expect(res.status).toBe(201);
      expect(res.body.data).toMatchObject({
        NAME: "Verdi SpA",
        CITY_ID: "MI",
        VIP: true,
        TREC: "N",
        OWNER: "anna",
      });
      expect(res.body.data.CDATA).toMatch(/^\d{14}$/);
      expect(res.body.data.CUST_ID).toEqual(expect.any(Number));
      // R-only and empty COD_ON_OFF fields are not in a detail view; D-only fields are.
      expect(res.body.data).not.toHaveProperty("RISK_SCORE");
      expect(res.body.data).not.toHaveProperty("INTERNAL");
      expect(res.body.data.EMAIL).toBe("v@verdi.example");
      expect(res.body.message).toEqual(expect.any(String));
      const events = await outboxRows(t.services, last);
      expect(events).toHaveLength(1);
      expect(String(events[0]!.OUTBOX_ID)).toBe(res.body.event_id);
      expect(events[0]).toMatchObject({
        EVENT_TYPE: "CUSTCreated",
        AGGREGATE_ID: String(res.body.data.CUST_ID),
      });
      const stored = await row(t.services, "TB_ANAG_CUST00", "CUST_ID", res.body.data.CUST_ID);
      expect(stored).toMatchObject({ TREC: "N", OWNER: "anna", TENANT_ID: "acme", LDATA: null });
    });

    it("refuses a field without N (FieldNotAllowedOnCreate), the generated id, and unknown fields", async () => {
      const noN = await anna.post(`${CUST}${q}`, { data: { NAME: "X", SALES_REP: "bob" } });
      expect(noN.status).toBe(400);
      expect(noN.body).toMatchObject({
        error: "FieldNotAllowedOnCreate",
        code: "FIELD_NOT_ALLOWED_ON_CREATE",
        status: 400,
        field: "SALES_REP",
      });
      const id = await anna.post(`${CUST}${q}`, { data: { NAME: "X", CUST_ID: 77 } });
      expect(id.body).toMatchObject({ code: "FIELD_NOT_ALLOWED_ON_CREATE", field: "CUST_ID" });
      const empty = await anna.post(`${CUST}${q}`, { data: { NAME: "X", INTERNAL: "secret" } });
      expect(empty.body).toMatchObject({ code: "FIELD_NOT_ALLOWED_ON_CREATE", field: "INTERNAL" });
      const unknown = await anna.post(`${CUST}${q}`, { data: { NAME: "X", FOO: 1 } });
      expect(unknown.status).toBe(400);
      expect(unknown.body).toMatchObject({ code: "INVALID_FIELD", field: "FOO", status: 400 });
    });

    it("applies the center_dett context: SALES_REP is creatable under 'nuovo' and defaults to {user}", async () => {
      const given = await anna.post(`${CUST}${q}&center_dett=nuovo`, {
        data: { NAME: "Ctx", SALES_REP: "bob" },
      });
      expect(given.status).toBe(201);
      expect(given.body.data.SALES_REP).toBe("bob");
      const templated = await marco.post(`${CUST}${q}&center_dett=nuovo`, { data: { NAME: "Ctx2" } });
      expect(templated.status).toBe(201);
      expect(templated.body.data.SALES_REP).toBe("marco");
    });

    it("answers 422 REQUIRED_FIELD_MISSING naming the field", async () => {
      const res = await anna.post(`${CUST}${q}`, { data: { EMAIL: "a@b.example" } });
      expect(res.status).toBe(422);
      expect(res.body).toMatchObject({
        error: "ValidationError",
        code: "REQUIRED_FIELD_MISSING",
        field: "NAME",
      });
      const blank = await anna.post(`${CUST}${q}`, { data: { NAME: "" } });
      expect(blank.status).toBe(422);
      const several = await anna.post("/api/v4/core/PRICE?source=price-1", { data: { AREA: "N" } });
      expect(several.status).toBe(422);
      expect(several.body.errors.map((e: { field: string }) => e.field)).toEqual([
        "PROD_ID",
        "COD_LST",
        "PRICE",
      ]);
    });

    it("a JSON field holding a number beyond a double's range is 400, not stored as null", async () => {
      const token = await loginAs(t.app, "anna", "anna-secret-1");
      const last = await lastOutboxId(t.services);
      for (const specs of ['{"a":1e400}', "[1,-1e999]"]) {
        const res = await t.app.inject({
          method: "POST",
          url: "/api/v4/core/PROD?source=catalog-1",
          headers: { ...bearer(token), "content-type": "application/json" },
          payload: `{"data":{"NAME":"P","UNIT_PRICE":1,"SPECS":${specs}}}`,
        });
        expect(res.statusCode, specs).toBe(400);
        expect(res.json()).toMatchObject({ code: "INVALID_FIELD_VALUE", field: "SPECS" });
      }
      expect(await outboxRows(t.services, last)).toEqual([]);
    });

    it("answers 400 INVALID_FIELD_VALUE for wrong types and lengths", async () => {
      const cases: Array<[string, string, Record<string, unknown>, string]> = [
        [CUST, q, { NAME: "x".repeat(101) }, "NAME"],
        [CUST, q, { NAME: 42 }, "NAME"],
        [CUST, q, { NAME: "X", CREDIT_LIMIT: "lots" }, "CREDIT_LIMIT"],
        [CUST, q, { NAME: "X", CREDIT_LIMIT: 12345678901 }, "CREDIT_LIMIT"],
        [CUST, q, { NAME: "X", VIP: "yes" }, "VIP"],
        [
          "/api/v4/core/PROD",
          "?source=catalog-1",
          { NAME: "P", UNIT_PRICE: 1, LAUNCHED: "2026-01-01" },
          "LAUNCHED",
        ],
        [
          "/api/v4/core/PROD",
          "?source=catalog-1",
          { NAME: "P", UNIT_PRICE: 1, LAUNCHED: "20260231" },
          "LAUNCHED",
        ],
        [
          "/api/v4/core/PROD",
          "?source=catalog-1",
          { NAME: "P", UNIT_PRICE: 1, SPECS: { a: "\u0000" } },
          "SPECS",
        ],
        ["/api/v4/core/PROD", "?source=catalog-1", { NAME: "P", UNIT_PRICE: 1e21 }, "UNIT_PRICE"],
        ["/api/v4/core/ORD", "?source=sales-1", { CUST_ID: 1.5 }, "CUST_ID"],
        ["/api/v4/core/ORD", "?source=sales-1", { CUST_ID: 1, ORD_DATE: "202611" }, "ORD_DATE"],
      ];
      for (const [path, query, data, field] of cases) {
        const res = await anna.post(`${path}${query}`, { data });
        expect(res.status, JSON.stringify(data)).toBe(400);
        expect(res.body).toMatchObject({ code: "INVALID_FIELD_VALUE", field, status: 400 });
      }
    });

    it("checks foreign keys: valid, missing, cancelled, and of another tenant", async () => {
      expect((await anna.post(`${CUST}${q}`, { data: { NAME: "FK ok", CITY_ID: "RM" } })).status).toBe(201);
      const missing = await anna.post(`${CUST}${q}`, { data: { NAME: "FK bad", CITY_ID: "XX" } });
      expect(missing.status).toBe(400);
      expect(missing.body).toMatchObject({ code: "INVALID_FOREIGN_KEY", field: "CITY_ID", status: 400 });
      const city = await greta.post("/api/v4/core/CITY?source=anag-3", {
        data: { CITY_ID: "GX", NAME: "Globexcity", COUNTRY: "DE" },
      });
      expect(city.status).toBe(201);
      const otherTenant = await anna.post(`${CUST}${q}`, { data: { NAME: "FK other", CITY_ID: "GX" } });
      expect(otherTenant.body).toMatchObject({ code: "INVALID_FOREIGN_KEY", field: "CITY_ID" });
      const addr = await anna.post("/api/v4/core/ADDR?source=anag-2", {
        data: { CUST_ID: 999999, KIND: "SHIP" },
      });
      expect(addr.body).toMatchObject({ code: "INVALID_FOREIGN_KEY", field: "CUST_ID" });
      const cancelled = await newCustomer();
      expect((await anna.delete(`${CUST}/${cancelled}${q}`)).status).toBe(200);
      const toCancelled = await anna.post("/api/v4/core/ADDR?source=anag-2", {
        data: { CUST_ID: cancelled, KIND: "X" },
      });
      expect(toCancelled.body).toMatchObject({ code: "INVALID_FOREIGN_KEY", field: "CUST_ID" });
      const id = await newCustomer();
      const patch = await anna.patch(`${CUST}/${id}${q}`, { data: { CITY_ID: "ZZ" } });
      expect(patch.body).toMatchObject({ code: "INVALID_FOREIGN_KEY", field: "CITY_ID" });
    });

    it("refuses a STRING id that is a word of the API's paths (export, count, …): it could not be addressed", async () => {
      const CITY = "/api/v4/core/CITY?source=anag-3";
      for (const id of ["export", "count", "fields", "batch"]) {
        const res = await anna.post(CITY, { data: { CITY_ID: id, NAME: "Path word", COUNTRY: "IT" } });
        expect(res.status, id).toBe(400);
        expect(res.body).toMatchObject({ code: "INVALID_FIELD_VALUE", field: "CITY_ID" });
        expect(res.body.message).toContain(`/api/v4/core/CITY/${id} is another endpoint`);
      }
      expect((await anna.post(CITY, { data: { CITY_ID: "EXP", NAME: "Fine", COUNTRY: "IT" } })).status).toBe(
        201,
      );
      // A key change to one: cascades.test (whose fixture lets CITY_ID be modified).
    });

    it("takes a key sent back unchanged though its parent was cancelled since (PUT and PATCH)", async () => {
      const city = await anna.post("/api/v4/core/CITY?source=anag-3", {
        data: { CITY_ID: "FKC", NAME: "Cancelled later", COUNTRY: "IT" },
      });
      expect(city.status).toBe(201);
      const id = await newCustomer({ CITY_ID: "FKC" });
      expect((await anna.delete(`/api/v4/core/CITY/FKC?source=anag-3`)).status).toBe(200);
      // A read-modify-PUT sends the key back as it is: not looked up again, not cleared.
      const put = await anna.put(`${CUST}/${id}${q}`, { data: { NAME: "Kept its city", CITY_ID: "FKC" } });
      expect(put.status, JSON.stringify(put.body)).toBe(200);
      expect(put.body.data).toMatchObject({ NAME: "Kept its city", CITY_ID: "FKC" });
      const patch = await anna.patch(`${CUST}/${id}${q}`, { data: { NOTES: "still", CITY_ID: "FKC" } });
      expect(patch.status, JSON.stringify(patch.body)).toBe(200);
      // A change to a cancelled parent is refused as before.
      const other = await newCustomer();
      const moved = await anna.patch(`${CUST}/${other}${q}`, { data: { CITY_ID: "FKC" } });
      expect(moved.body).toMatchObject({ code: "INVALID_FOREIGN_KEY", field: "CITY_ID" });
    });

    it("fills every template placeholder on create, the body's own values first", async () => {
      const first = await anna.post("/api/v4/core/TPL?source=erp", { data: { NAME: "abc" } });
      expect(first.status).toBe(201);
      const d = first.body.data;
      const year = d.CDATA.slice(0, 4);
      expect(d).toMatchObject({
        NOW_AT: d.CDATA,
        TODAY: d.CDATA.slice(0, 8),
        YEAR_TXT: year,
        USER_TXT: "anna",
        TENANT_TXT: "acme",
        SOURCE_TXT: "erp",
        CENTRO_TXT: "HQ",
        AMBIENTE_TXT: "production",
        PLAIN_SEQ: "1",
        CODE: `abc/${year}/0001`,
        FIXED: "LIT",
      });
      expect(d.UUID_TXT).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
      const second = await anna.post("/api/v4/core/TPL?source=erp", {
        data: { NAME: "def", FIXED: "mine", TODAY: null },
      });
      expect(second.body.data).toMatchObject({ PLAIN_SEQ: "2", CODE: `def/${year}/0002`, FIXED: "mine" });
      expect(second.body.data.TODAY).toMatch(/^\d{8}$/);
      // A refused create gives its sequence numbers back.
      expect(
        (await anna.post("/api/v4/core/TPL?source=erp", { data: { NAME: "x".repeat(41) } })).status,
      ).toBe(400);
      const third = await anna.post("/api/v4/core/TPL?source=erp", { data: { NAME: "ghi" } });
      expect(third.body.data).toMatchObject({ PLAIN_SEQ: "3", CODE: `ghi/${year}/0003` });
    });

    it("refuses bad bodies with the standard error body", async () => {
      for (const payload of [{}, { data: [] }, { data: "x" }, { data: null }]) {
        const res = await anna.post(`${CUST}${q}`, payload);
        expect(res.status).toBe(400);
        expect(res.body).toMatchObject({ code: "INVALID_REQUEST", status: 400, error: expect.any(String) });
      }
      const raw = await t.app.inject({
        method: "POST",
        url: `${CUST}${q}`,
        headers: {
          "content-type": "application/json",
          ...bearer(await loginAs(t.app, "anna", "anna-secret-1")),
        },
        payload: "{not json",
      });
      expect(raw.statusCode).toBe(400);
    });

    it("refuses a body whose source (or center_dett) disagrees with the query string's; nothing is written", async () => {
      const before = await lastOutboxId(t.services);
      const res = await anna.post(`${CUST}?source=anag-1`, { source: "erp", data: { NAME: "Two sources" } });
      expect(res.status).toBe(400);
      expect(res.body).toEqual({
        error: "BadRequest",
        message:
          "source is given twice with different values: 'anag-1' in the query string, 'erp' in the body. Give it once, or the same in both.",
        code: "INVALID_PARAMETER",
        status: 400,
        field: "source",
      });
      const id = await newCustomer();
      const patched = await anna.patch(`${CUST}/${id}?source=anag-1&center_dett=nuovo`, {
        center_dett: "modifica",
        data: { NAME: "Two contexts" },
      });
      expect(patched.status).toBe(400);
      expect(patched.body).toEqual({
        error: "BadRequest",
        message:
          "center_dett is given twice with different values: 'nuovo' in the query string, 'modifica' in the body. Give it once, or the same in both.",
        code: "INVALID_PARAMETER",
        status: 400,
        field: "center_dett",
      });
      expect(await row(t.services, "TB_ANAG_CUST00", "CUST_ID", id)).toMatchObject({ NAME: "Test Srl" });
      expect(await lastOutboxId(t.services)).toBe(before + 1); // newCustomer's event only
      // The same value twice is one scope.
      const same = await anna.post(`${CUST}?source=anag-1`, {
        source: "anag-1",
        data: { NAME: "One source" },
      });
      expect(same.status).toBe(201);
    });
  });

  describe("update", () => {
    it("PATCH changes the fields sent: 200 with TREC M, LDATA and LOWNER", async () => {
      const id = await newCustomer({ EMAIL: "keep@x.example" });
      const res = await marco.patch(`${CUST}/${id}${q}`, { data: { NAME: "Renamed", VIP: false } });
      expect(res.status).toBe(200);
      expect(res.body.data).toMatchObject({
        CUST_ID: id,
        NAME: "Renamed",
        VIP: false,
        EMAIL: "keep@x.example",
      });
      expect(res.body.data).toMatchObject({ TREC: "M", LOWNER: "marco", OWNER: "anna" });
      expect(res.body.data.LDATA).toMatch(/^\d{14}$/);
      expect(res.body.event_id).toEqual(expect.any(String));
      const [event] = await outboxRows(t.services, Number(res.body.event_id) - 1);
      expect(event).toMatchObject({ EVENT_TYPE: "CUSTUpdated", AGGREGATE_ID: String(id) });
    });

    it("PATCH refuses fields without M (FieldNotModifiable) and unknown fields; an echoed id is fine", async () => {
      const id = await newCustomer();
      const code = await anna.patch(`${CUST}/${id}${q}`, { data: { CODE: "C-X" } });
      expect(code.status).toBe(400);
      expect(code.body).toMatchObject({
        error: "FieldNotModifiable",
        code: "FIELD_NOT_MODIFIABLE",
        field: "CODE",
      });
      const newId = await anna.patch(`${CUST}/${id}${q}`, { data: { CUST_ID: id + 1000 } });
      expect(newId.body).toMatchObject({ code: "FIELD_NOT_MODIFIABLE", field: "CUST_ID" });
      const unknown = await anna.patch(`${CUST}/${id}${q}`, { data: { NOPE: 1 } });
      expect(unknown.body).toMatchObject({ code: "INVALID_FIELD", field: "NOPE" });
      const echo = await anna.patch(`${CUST}/${id}${q}`, { data: { CUST_ID: id, NOTES: "n" } });
      expect(echo.status).toBe(200);
      const required = await anna.patch(`${CUST}/${id}${q}`, { data: { NAME: null } });
      expect(required.status).toBe(422);
      expect(required.body).toMatchObject({ code: "REQUIRED_FIELD_MISSING", field: "NAME" });
    });

    it("PUT clears every M field it leaves out; fields without M keep their values", async () => {
      const id = await newCustomer({
        CITY_ID: "MI",
        EMAIL: "e@x.example",
        VIP: true,
        NOTES: "n",
        CREDIT_LIMIT: 10,
      });
      const before = await row(t.services, "TB_ANAG_CUST00", "CUST_ID", id);
      const res = await anna.put(`${CUST}/${id}${q}`, { data: { NAME: "Only Name" } });
      expect(res.status).toBe(200);
      expect(res.body.data).toMatchObject({ NAME: "Only Name", TREC: "M", LOWNER: "anna" });
      const stored = await row(t.services, "TB_ANAG_CUST00", "CUST_ID", id);
      expect(stored).toMatchObject({
        NAME: "Only Name",
        CITY_ID: null,
        EMAIL: null,
        VIP: null,
        NOTES: null,
        CREDIT_LIMIT: null,
        SALES_REP: null,
        CODE: before?.CODE,
        OWNER: "anna",
      });
      const missing = await anna.put(`${CUST}/${id}${q}`, { data: { EMAIL: "x@y.example" } });
      expect(missing.status).toBe(422);
      expect(missing.body).toMatchObject({ code: "REQUIRED_FIELD_MISSING", field: "NAME" });
    });

    it("answers 404 for a record of another tenant, a missing or malformed id, an unknown dimension", async () => {
      const id = await newCustomer();
      const other = await greta.patch(`${CUST}/${id}${q}`, { data: { NAME: "Hijack" } });
      expect(other.status).toBe(404);
      expect(other.body).toMatchObject({ code: "RECORD_NOT_FOUND", status: 404 });
      expect((await greta.delete(`${CUST}/${id}${q}`)).status).toBe(404);
      expect((await anna.patch(`${CUST}/99999999${q}`, { data: { NAME: "x" } })).body.code).toBe(
        "RECORD_NOT_FOUND",
      );
      expect((await anna.patch(`${CUST}/abc${q}`, { data: { NAME: "x" } })).body.code).toBe(
        "RECORD_NOT_FOUND",
      );
      const dim = await anna.post("/api/v4/core/NOPE?source=erp", { data: { A: 1 } });
      expect(dim.status).toBe(404);
      expect(dim.body.code).toBe("DIMENSION_NOT_FOUND");
      // Through a source that serves another dimension too: a mistyped dimension is 404 whatever
      // the method, as a read of it is (not 403 "serves CUST, not NOPE").
      const writes = [
        anna.post(`/api/v4/core/NOPE${q}`, { data: { A: 1 } }),
        anna.patch(`/api/v4/core/NOPE/1${q}`, { data: { A: 1 } }),
        anna.put(`/api/v4/core/NOPE/1${q}`, { data: { A: 1 } }),
        anna.delete(`/api/v4/core/NOPE/1${q}`),
        anna.get(`/api/v4/core/NOPE/1${q}`),
      ];
      for (const res of await Promise.all(writes)) {
        expect(res.status, JSON.stringify(res.body)).toBe(404);
        expect(res.body.code).toBe("DIMENSION_NOT_FOUND");
      }
    });
  });

  describe("TREC state machine (spec 3.1)", () => {
    async function trec(id: number) {
      return (await row(t.services, "TB_ANAG_CUST00", "CUST_ID", id))?.TREC;
    }
    async function expectMove(
      id: number,
      req: Promise<{ status: number; body: { code?: string } }>,
      to: string,
    ) {
      const res = await req;
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(await trec(id)).toBe(to);
    }
    async function expectRefused(id: number, req: Promise<{ status: number; body: { code?: string } }>) {
      const before = await trec(id);
      const res = await req;
      expect(res.status).toBe(400);
      expect(res.body.code).toBe("INVALID_STATE_TRANSITION");
      expect(await trec(id)).toBe(before);
    }
    const url = (id: number) => `${CUST}/${id}${q}`;

    it("moves N→M and M→M on PUT and PATCH; TREC M in the body is accepted", async () => {
      const a = await newCustomer();
      await expectMove(a, anna.patch(url(a), { data: { NOTES: "1" } }), "M");
      await expectMove(a, anna.patch(url(a), { data: { NOTES: "2", TREC: "M" } }), "M");
      await expectMove(a, anna.put(url(a), { data: { NAME: "PUT" } }), "M");
      const b = await newCustomer();
      await expectMove(b, anna.put(url(b), { data: { NAME: "PUT" } }), "M");
    });

    it("moves N→C and M→C on DELETE, C→M on PATCH with TREC M (restore)", async () => {
      const a = await newCustomer();
      await expectMove(a, anna.delete(url(a)), "C");
      await expectMove(a, anna.patch(url(a), { data: { TREC: "M", NOTES: "back" } }), "M");
      await expectMove(a, anna.delete(url(a)), "C");
      const stored = await row(t.services, "TB_ANAG_CUST00", "CUST_ID", a);
      expect(stored).toMatchObject({ LOWNER: "anna", NOTES: "back" });
    });

    it("moves N→P and M→P on PATCH with TREC P, and P→M on any PATCH", async () => {
      const a = await newCustomer();
      await expectMove(a, anna.patch(url(a), { data: { TREC: "P" } }), "P");
      await expectMove(a, anna.patch(url(a), { data: { NOTES: "done" } }), "M");
      await expectMove(a, anna.patch(url(a), { data: { TREC: "P", NOTES: "again" } }), "P");
      await expectMove(a, anna.patch(url(a), { data: { TREC: "M" } }), "M");
    });

    it("removes N, M and C records on DELETE ?force=true", async () => {
      for (const prepare of [
        async () => {},
        async (id: number) => anna.patch(url(id), { data: { NOTES: "m" } }),
        async (id: number) => anna.delete(url(id)),
      ]) {
        const id = await newCustomer();
        await prepare(id);
        const res = await anna.delete(`${CUST}/${id}${q}&force=true`);
        expect(res.status).toBe(200);
        expect(await row(t.services, "TB_ANAG_CUST00", "CUST_ID", id)).toBeUndefined();
      }
    });

    it("refuses M→N, C→N, P→N and every other move with 400 INVALID_STATE_TRANSITION", async () => {
      const m = await newCustomer();
      await anna.patch(url(m), { data: { NOTES: "m" } });
      await expectRefused(m, anna.patch(url(m), { data: { TREC: "N" } }));
      await expectRefused(m, anna.put(url(m), { data: { NAME: "x", TREC: "N" } }));
      await expectRefused(m, anna.patch(url(m), { data: { TREC: "C" } }));
      await expectRefused(m, anna.put(url(m), { data: { NAME: "x", TREC: "P" } }));

      const n = await newCustomer();
      await expectRefused(n, anna.patch(url(n), { data: { TREC: "N" } }));

      const c = await newCustomer();
      await anna.delete(url(c));
      await expectRefused(c, anna.patch(url(c), { data: { TREC: "N" } }));
      await expectRefused(c, anna.patch(url(c), { data: { NOTES: "no restore" } }));
      await expectRefused(c, anna.patch(url(c), { data: { TREC: "P" } }));
      await expectRefused(c, anna.put(url(c), { data: { NAME: "x", TREC: "M" } }));
      await expectRefused(c, anna.delete(url(c)));

      const p = await newCustomer();
      await anna.patch(url(p), { data: { TREC: "P" } });
      await expectRefused(p, anna.patch(url(p), { data: { TREC: "N" } }));
      await expectRefused(p, anna.patch(url(p), { data: { TREC: "P" } }));
      await expectRefused(p, anna.delete(url(p)));
      await expectRefused(p, anna.delete(`${CUST}/${p}${q}&force=true`));

      const bad = await anna.patch(url(p), { data: { TREC: "X" } });
      expect(bad.body).toMatchObject({ status: 400, code: "INVALID_FIELD_VALUE", field: "TREC" });
    });
  });

  describe("delete", () => {
    it("soft delete answers 200 with the id, TREC C, LDATA, LOWNER and event_id; the record stays", async () => {
      const id = await newCustomer();
      const res = await marco.delete(`${CUST}/${id}${q}`);
      expect(res.status).toBe(200);
      expect(res.body.data).toMatchObject({ CUST_ID: id, TREC: "C", LOWNER: "marco" });
      expect(res.body.data.LDATA).toMatch(/^\d{14}$/);
      expect(res.body.data).not.toHaveProperty("NAME");
      expect(res.body.event_id).toEqual(expect.any(String));
      expect(await row(t.services, "TB_ANAG_CUST00", "CUST_ID", id)).toMatchObject({
        TREC: "C",
        NAME: "Test Srl",
      });
      const [event] = await outboxRows(t.services, Number(res.body.event_id) - 1);
      expect(event).toMatchObject({ EVENT_TYPE: "CUSTDeleted", AGGREGATE_ID: String(id) });
      expect(event!.PAYLOAD).toMatchObject({ TREC: "C", NAME: "Test Srl" });
      expect(event!.PAYLOAD).not.toHaveProperty("force");
    });

    it("force delete needs the force_delete grant; it answers {message, record_id, event_id}", async () => {
      const id = await newCustomer();
      const denied = await marco.delete(`${CUST}/${id}${q}&force=true`);
      expect(denied.status).toBe(403);
      expect(denied.body).toMatchObject({ code: "INSUFFICIENT_PERMISSIONS", required_grant: "force_delete" });
      expect(await row(t.services, "TB_ANAG_CUST00", "CUST_ID", id)).toBeDefined();
      const res = await anna.delete(`${CUST}/${id}${q}&force=true`);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ message: expect.any(String), record_id: id, event_id: expect.any(String) });
      expect(await row(t.services, "TB_ANAG_CUST00", "CUST_ID", id)).toBeUndefined();
      const [event] = await outboxRows(t.services, Number(res.body.event_id) - 1);
      expect(event).toMatchObject({ EVENT_TYPE: "CUSTDeleted", AGGREGATE_ID: String(id) });
      expect(event!.PAYLOAD).toMatchObject({ CUST_ID: id, force: true, NAME: "Test Srl" });
      expect((await anna.delete(`${CUST}/${id}${q}&force=maybe`)).body.code).toBe("INVALID_PARAMETER");
    });

    it("an empty force (`force=`, a bare `force`) is refused, not taken as true: the record stays", async () => {
      const id = await newCustomer();
      for (const flag of ["&force=", "&force"]) {
        const res = await anna.delete(`${CUST}/${id}${q}${flag}`);
        expect(res.status).toBe(400);
        expect(res.body).toMatchObject({ code: "INVALID_PARAMETER", field: "force" });
      }
      const batch = await anna.post(`${CUST}/batch-delete${q}`, { ids: [id], force: "" });
      expect(batch.status).toBe(400);
      expect(batch.body).toMatchObject({ code: "INVALID_PARAMETER", field: "force" });
      expect(await row(t.services, "TB_ANAG_CUST00", "CUST_ID", id)).toMatchObject({ TREC: "N" });
    });

    it("checks grants: level 3 to delete, write to create, a source serving the dimension", async () => {
      const ord = (await anna.post("/api/v4/core/ORD?source=sales-1", { data: { CUST_ID: 1 } })).body.data
        .ORD_ID;
      const lowLevel = await marco.delete(`/api/v4/core/ORD/${ord}?source=sales-1`);
      expect(lowLevel.status).toBe(403);
      expect(lowLevel.body).toMatchObject({ code: "INSUFFICIENT_PERMISSIONS", required_grant: 3 });
      const readOnly = await lucia.post(`${CUST}${q}`, { data: { NAME: "Nope" } });
      expect(readOnly.status).toBe(403);
      expect(readOnly.body.user_grants).toEqual(expect.any(Array));
      const wrongSource = await anna.post("/api/v4/core/CUST?source=anag-2", { data: { NAME: "Nope" } });
      expect(wrongSource.status).toBe(403);
      const noSource = await anna.post("/api/v4/core/CUST", { data: { NAME: "Nope" } });
      expect(noSource.status).toBe(400);
      expect(noSource.body.code).toBe("MISSING_PARAMETER");
      const inBody = await anna.post("/api/v4/core/CUST", {
        source: "anag-1",
        data: { NAME: "Source in body" },
      });
      expect(inBody.status).toBe(201);
      const anonymous = await client(t.app, null).post(`${CUST}${q}`, { data: { NAME: "Anon" } });
      expect(anonymous.status).toBe(401);
    });
  });
});
