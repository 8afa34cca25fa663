// HTTP tests of the read endpoints (spec 4.2) over the sample fixture, logged in as its users.
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, loginAs } from "../helpers/auth.ts";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";
import { NO_RATE_LIMITS, sampleFixture } from "./support.ts";

/** The sample plus one center_dett override that changes reads: NOTES (DNM) is LDR under "visualizza". */
function readFixture() {
  const f = sampleFixture();
  f.TB_COST.push({
    COD_DIM: "CUST",
    NUM_COST: 101,
    COD_VAR: "NOTES",
    COD_ON_OFF: "LDR",
    REQUIRED: false,
    RENDER_HINT: "textarea",
    GROUP_NAME: "main",
    VALUE_TEMP: null,
    COD_UTENTE: null,
    CENTER_DETT: "visualizza",
  });
  return f;
}

function u(path: string, params: Record<string, string> = {}): string {
  const qs = new URLSearchParams(params).toString();
  return qs ? `${path}?${qs}` : path;
}

type Body = Record<string, unknown> & { data: Array<Record<string, unknown>> };

describe.each(BACKENDS)("read endpoints (%s)", (backend) => {
  let t: TestApp;
  let app: FastifyInstance;
  const tokens: Record<string, string> = {};

  async function get(user: string | null, url: string) {
    const res = await app.inject({ method: "GET", url, headers: user ? bearer(tokens[user]!) : {} });
    expect(res.statusCode, `${url} -> ${res.body}`).toBeLessThan(500);
    return { status: res.statusCode, body: res.json() as Body, headers: res.headers };
  }

  /** GET as anna on CUST through anag-1, unless the params say otherwise. */
  async function list(params: Record<string, string>, user = "anna", path = "/api/v4/core/CUST") {
    return get(user, u(path, { source: "anag-1", ...params }));
  }

  async function ids(params: Record<string, string>, user = "anna"): Promise<unknown[]> {
    const res = await list(params, user);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body.data.map((r) => r.CUST_ID);
  }

  beforeAll(async () => {
    t = await createTestApp(backend, { fixture: readFixture(), env: NO_RATE_LIMITS });
    app = t.app;
    const db = t.services.db;
    // Values the write path cannot set (RISK_SCORE is R only, INTERNAL has no flag), and one
    // cancelled customer.
    await db.query(
      `UPDATE "TB_ANAG_CUST00" SET "RISK_SCORE" = 10, "INTERNAL" = 'secret-1', "NOTES" = 'pays late' WHERE "CUST_ID" = 1`,
    );
    await db.query(`UPDATE "TB_ANAG_CUST00" SET "RISK_SCORE" = 80 WHERE "CUST_ID" = 2`);
    await db.query(`UPDATE "TB_ANAG_CUST00" SET "RISK_SCORE" = 50 WHERE "CUST_ID" = 3`);
    await db.query(`UPDATE "TB_ANAG_CUST00" SET "TREC" = 'C' WHERE "CUST_ID" = 4`);
    // A longer table for keyset paging: 300 live price lists and 5 cancelled ones.
    await db.query(
      `INSERT INTO "TB_ANAG_LST00" ("COD_LST", "DESC_LST", "TREC", "CDATA", "OWNER", "TENANT_ID")
       SELECT 'K' || lpad(g::text, 4, '0'), 'List ' || g, CASE WHEN g % 61 = 0 THEN 'C' ELSE 'N' END,
              '20260101000000', 'test', 'acme'
         FROM generate_series(1, 305) AS g`,
    );
    for (const [user, password] of [
      ["anna", "anna-secret-1"],
      ["marco", "marco-secret-2"],
      ["lucia", "lucia-secret-3"],
      ["greta", "greta-secret-4"],
    ] as const) {
      tokens[user] = await loginAs(app, user, password);
    }
  });

  afterAll(async () => {
    await t?.close();
  });

  describe("list", () => {
    it("answers {data, meta} with the live records, list fields only", async () => {
      const res = await list({});
      expect(res.status).toBe(200);
      expect(res.headers["content-type"]).toMatch(/^application\/json/);
      expect(res.body.meta).toEqual({ total: 3, num_rows: 100, offset: 0, has_more: false });
      expect(res.body.data.map((r) => r.NAME)).toEqual(["Rossi Srl", "Bianchi SpA", "Verdi & Figli"]);
      expect(Object.keys(res.body.data[0]!)).toEqual([
        "CUST_ID",
        "CODE",
        "NAME",
        "CITY_ID",
        "CREDIT_LIMIT",
        "VIP",
        "SALES_REP",
        "TREC",
        "CDATA",
        "OWNER",
        "LDATA",
        "LOWNER",
      ]);
      expect(res.body.data[0]).toMatchObject({
        CUST_ID: 1,
        CODE: "C-00001",
        CREDIT_LIMIT: 50000,
        VIP: true,
        TREC: "N",
      });
      expect(res.body.data[2]).toMatchObject({ CREDIT_LIMIT: 8000.5, VIP: null, SALES_REP: null });
    });

    it("follows each COD_ON_OFF pattern of spec 2.3.7 in list, detail and filter", async () => {
      const listed = (await list({})).body.data[0]!;
      const detail = (await get("anna", u("/api/v4/core/CUST/1", { source: "anag-1" }))).body
        .data as unknown as Record<string, unknown>;
      const patterns: Array<
        [field: string, code: string, inList: boolean, inDetail: boolean, searchable: boolean]
      > = [
        ["NAME", "LDRNM", true, true, true],
        ["CUST_ID", "LDR", true, true, true],
        ["CODE", "LDRN", true, true, true],
        ["SALES_REP", "LDRM", true, true, true],
        ["EMAIL", "DNMR", false, true, true],
        ["RISK_SCORE", "R", false, false, true],
        ["NOTES", "DNM", false, true, false],
        ["INTERNAL", "", false, false, false],
      ];
      for (const [field, code, inList, inDetail, searchable] of patterns) {
        expect(field in listed, `${field} (${code}) in list`).toBe(inList);
        expect(field in detail, `${field} (${code}) in detail`).toBe(inDetail);
        const other = field === "CUST_ID" || field === "RISK_SCORE" ? "0" : "zz-no-such-value";
        const filtered = await list({ [`filter[${field}][$ne]`]: other });
        if (searchable) expect(filtered.status, `${field} (${code}) searchable`).toBe(200);
        else
          expect(filtered.body).toMatchObject({
            status: 400,
            code: "FIELD_NOT_SEARCHABLE",
            error: "FieldNotSearchable",
            field,
          });
      }
      expect(detail).toMatchObject({ EMAIL: "info@rossi.example", NOTES: "pays late" });
      // R: searchable though never shown.
      expect(await ids({ "filter[RISK_SCORE][$gt]": "40" })).toEqual([2, 3]);
      expect(await ids({ "filter[EMAIL]": "info@rossi.example" })).toEqual([1]);
    });

    it("returns forceListCost fields whatever their COD_ON_OFF", async () => {
      const res = await list({ forceListCost: "INTERNAL,EMAIL", "filter[CUST_ID]": "1" });
      expect(res.body.data).toEqual([
        expect.objectContaining({ INTERNAL: "secret-1", EMAIL: "info@rossi.example", NAME: "Rossi Srl" }),
      ]);
      expect((await list({ forceListCost: "NOPE" })).body).toMatchObject({
        status: 400,
        code: "INVALID_FIELD",
        field: "NOPE",
      });
    });

    it("applies a center_dett override of TB_COST (NOTES is LDR under visualizza)", async () => {
      const plain = await list({ "filter[CUST_ID]": "1" });
      expect(plain.body.data[0]).not.toHaveProperty("NOTES");
      const overridden = await list({ center_dett: "visualizza", "filter[NOTES][$like]": "pays%" });
      expect(overridden.status).toBe(200);
      expect(overridden.body.data).toEqual([expect.objectContaining({ CUST_ID: 1, NOTES: "pays late" })]);
      expect((await list({ "filter[NOTES][$like]": "pays%" })).body).toMatchObject({
        code: "FIELD_NOT_SEARCHABLE",
      });
    });

    it("hides a field from users whose peso is above its COD_UTENTE (CREDIT_LIMIT: 2)", async () => {
      const anna = (await list({}, "anna")).body.data[0]!;
      const marco = (await list({}, "marco")).body.data[0]!;
      const lucia = (await list({}, "lucia")).body.data[0]!;
      expect(anna.CREDIT_LIMIT).toBe(50000);
      expect(marco.CREDIT_LIMIT).toBe(50000);
      expect(lucia).not.toHaveProperty("CREDIT_LIMIT");
      expect(lucia).toHaveProperty("NAME", "Rossi Srl");
      expect(await ids({ "filter[CREDIT_LIMIT][$gt]": "60000" }, "marco")).toEqual([2]);
      const hidden: Array<Record<string, string>> = [
        { "filter[CREDIT_LIMIT][$gt]": "1" },
        { sort: "CREDIT_LIMIT" },
        { $fields: "CREDIT_LIMIT" },
      ];
      for (const params of hidden) {
        expect((await list(params, "lucia")).body).toMatchObject({
          status: 400,
          code: "INVALID_FIELD",
          field: "CREDIT_LIMIT",
        });
      }
      const detail = await get("lucia", u("/api/v4/core/CUST/2", { source: "anag-1" }));
      expect(detail.body.data).not.toHaveProperty("CREDIT_LIMIT");
    });
  });

  describe("filter operators", () => {
    it("filter[field]=value is equality; every $op of the bracket form", async () => {
      const cases: Array<[Record<string, string>, unknown[]]> = [
        [{ "filter[NAME]": "Rossi Srl" }, [1]],
        [{ "filter[NAME][$eq]": "Bianchi SpA" }, [2]],
        [{ "filter[CITY_ID][$ne]": "MI" }, [2, 3]],
        [{ "filter[CREDIT_LIMIT][$gt]": "8000.5" }, [1, 2]],
        [{ "filter[CREDIT_LIMIT][$gte]": "8000.5" }, [1, 2, 3]],
        [{ "filter[CREDIT_LIMIT][$lt]": "50000" }, [3]],
        [{ "filter[CREDIT_LIMIT][$lte]": "50000" }, [1, 3]],
        [{ "filter[CITY_ID][$in]": "MI,TO" }, [1, 3]],
        [{ "filter[CITY_ID][$nin]": "MI" }, [2, 3]],
        [{ "filter[NAME][$like]": "%Sp%" }, [2]],
        [{ "filter[NAME][$like]": "R_ssi%" }, [1]],
        [{ "filter[CUST_ID][$between]": "2,3" }, [2, 3]],
        [{ "filter[VIP]": "true" }, [1]],
        [{ "filter[VIP][$ne]": "true" }, [2, 3]],
        [{ "filter[CDATA][$gte]": "20000101000000" }, [1, 2, 3]],
        [{ "filter[CITY_ID][$in]": "MI,RM", "filter[CREDIT_LIMIT][$gt]": "60000" }, [2]],
      ];
      for (const [params, expected] of cases)
        expect(await ids(params), JSON.stringify(params)).toEqual(expected);
    });

    it("$filter: comparisons, functions, and/or/not, parentheses, literals", async () => {
      const cases: Array<[string, unknown[]]> = [
        ["NAME eq 'Verdi & Figli'", [3]],
        ["CITY_ID ne 'MI'", [2, 3]],
        ["CREDIT_LIMIT gt 50000", [2]],
        ["CREDIT_LIMIT ge 50000", [1, 2]],
        ["CREDIT_LIMIT lt 50000", [3]],
        ["CREDIT_LIMIT le 8000.5", [3]],
        ["startwith(NAME,'Ro')", [1]],
        ["endwith(NAME, 'SpA')", [2]],
        ["contains(NAME,'&')", [3]],
        ["equals(CITY_ID,'TO')", [3]],
        ["VIP eq true or VIP eq false", [1, 2]],
        ["VIP eq null", [3]],
        ["not VIP eq null and CREDIT_LIMIT gt 60000", [2]],
        ["(CITY_ID eq 'MI' or CITY_ID eq 'RM') and not (CREDIT_LIMIT lt 100000)", [2]],
        ["NAME eq 'O''Brien' or NAME eq \"Rossi Srl\"", [1]],
        ["CUST_ID ge 2 AND CUST_ID LE 3", [2, 3]],
      ];
      for (const [expr, expected] of cases) expect(await ids({ $filter: expr }), expr).toEqual(expected);
      expect(await ids({ $filter: "CREDIT_LIMIT gt 10000", "filter[CITY_ID]": "RM" })).toEqual([2]);
    });

    it("count answers {count, dimension, filters_applied} with the list filters", async () => {
      const res = await get(
        "anna",
        u("/api/v4/core/CUST/count", { source: "anag-1", "filter[CITY_ID][$in]": "MI,TO" }),
      );
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        count: 2,
        dimension: "CUST",
        filters_applied: { TREC: { $ne: "C" }, CITY_ID: { $in: ["MI", "TO"] } },
      });
      const expr = await get(
        "anna",
        u("/api/v4/core/CUST/count", { source: "anag-1", $filter: "VIP eq true or VIP eq false" }),
      );
      expect(expr.body).toEqual({
        count: 2,
        dimension: "CUST",
        filters_applied: { TREC: { $ne: "C" }, $or: [{ VIP: { $eq: true } }, { VIP: { $eq: false } }] },
      });
      expect(
        (await get("anna", u("/api/v4/core/CUST/count", { source: "anag-1", cond_trec: "C" }))).body,
      ).toMatchObject({
        count: 1,
        filters_applied: { TREC: { $in: ["C"] } },
      });
      // Text functions echo the text as written, not the LIKE pattern compiled from it.
      const text = await get(
        "anna",
        u("/api/v4/core/CUST/count", {
          source: "anag-1",
          $filter: "startwith(NAME,'Ro') or contains(NAME,'50%')",
        }),
      );
      expect(text.body).toMatchObject({
        filters_applied: { $or: [{ NAME: { $startswith: "Ro" } }, { NAME: { $contains: "50%" } }] },
      });
    });
  });

  describe("sort, paging, fields", () => {
    it("sorts by sort (- for descending) and $order, stably by id", async () => {
      expect(await ids({ sort: "-NAME" })).toEqual([3, 1, 2]);
      expect(await ids({ $order: "NAME ASC" })).toEqual([2, 1, 3]);
      expect(await ids({ $order: "CREDIT_LIMIT DESC" })).toEqual([2, 1, 3]);
      expect(await ids({ sort: "VIP" })).toEqual([2, 1, 3]);
      expect(await ids({ sort: "-TREC" })).toEqual([1, 2, 3]);
      expect(await ids({ sort: "CITY_ID,-CUST_ID" })).toEqual([1, 2, 3]);
    });

    it("pages with $num_rows and $offset and tells whether there is more", async () => {
      const first = await list({ $num_rows: "2" });
      expect(first.body.data.map((r) => r.CUST_ID)).toEqual([1, 2]);
      expect(first.body.meta).toEqual({ total: 3, num_rows: 2, offset: 0, has_more: true });
      const second = await list({ $num_rows: "2", $offset: "2" });
      expect(second.body.data.map((r) => r.CUST_ID)).toEqual([3]);
      expect(second.body.meta).toEqual({ total: 3, num_rows: 2, offset: 2, has_more: false });
      const beyond = await list({ $offset: "10" });
      expect(beyond.body).toEqual({
        data: [],
        meta: { total: 3, num_rows: 100, offset: 10, has_more: false },
      });
      expect((await list({ $num_rows: "0" })).body).toEqual({
        data: [],
        meta: { total: 3, num_rows: 0, offset: 0, has_more: true },
      });
      expect((await list({ $num_rows: "1000" })).status).toBe(200);
    });

    it("returns only the fields asked for with $fields or $select", async () => {
      expect((await list({ $fields: "NAME,CODE" })).body.data[0]).toEqual({
        CODE: "C-00001",
        NAME: "Rossi Srl",
      });
      expect((await list({ $select: "NAME" })).body.data.map((r) => r.NAME)).toEqual([
        "Rossi Srl",
        "Bianchi SpA",
        "Verdi & Figli",
      ]);
      // EMAIL (DNMR) is not a list field: left out of lists even when asked for.
      expect((await list({ $fields: "NAME,EMAIL", "filter[CUST_ID]": "1" })).body.data).toEqual([
        { NAME: "Rossi Srl" },
      ]);
      const detail = await get("anna", u("/api/v4/core/CUST/1", { source: "anag-1", $fields: "NAME,EMAIL" }));
      expect(detail.body.data).toEqual({ NAME: "Rossi Srl", EMAIL: "info@rossi.example" });
      // An empty $fields asks for nothing in particular: every field, as without it.
      expect((await list({ $fields: "" })).body.data).toEqual((await list({})).body.data);
      expect((await list({ $fields: "" })).body.data[0]).toHaveProperty("NAME", "Rossi Srl");
    });

    it("pages through a whole table by keyset (sort by id, id $gt last) with no row missed or repeated", async () => {
      const seen: string[] = [];
      let last: string | null = null;
      for (let page = 0; page < 20; page++) {
        const params: Record<string, string> = { sort: "COD_LST", $num_rows: "37", $fields: "COD_LST" };
        if (last !== null) params["filter[COD_LST][$gt]"] = last;
        const res = await get("anna", u("/api/v4/core/LST", { source: "catalog-2", ...params }));
        expect(res.status).toBe(200);
        const keys = res.body.data.map((r) => r.COD_LST as string);
        seen.push(...keys);
        if (!(res.body.meta as { has_more: boolean }).has_more) break;
        last = keys[keys.length - 1]!;
      }
      const truth = await t.services.db.query<{ COD_LST: string }>(
        `SELECT "COD_LST" FROM "TB_ANAG_LST00" WHERE "TENANT_ID" = 'acme' AND "TREC" <> 'C' ORDER BY "COD_LST"`,
      );
      expect(truth.rows.length).toBe(302);
      expect(seen).toEqual(truth.rows.map((r) => r.COD_LST));
      expect(new Set(seen).size).toBe(seen.length);
      expect(seen).not.toContain("K0061");
    });
  });

  describe("expand", () => {
    it("embeds forward relations as an object and reverse ones as an array under the child's code", async () => {
      const res = await list({ $expand: "CITY,ADDR,ORD", $fields: "NAME" });
      expect(res.status).toBe(200);
      const [rossi, bianchi, verdi] = res.body.data;
      expect(rossi).toMatchObject({
        NAME: "Rossi Srl",
        CITY: { CITY_ID: "MI", NAME: "Milano", COUNTRY: "IT" },
      });
      expect(rossi!).not.toHaveProperty("CITY_ID");
      expect((rossi!.ADDR as Array<Record<string, unknown>>).map((a) => a.KIND)).toEqual(["BILL", "SHIP"]);
      expect((rossi!.ORD as Array<Record<string, unknown>>).map((o) => o.ORD_ID)).toEqual([1]);
      expect(bianchi).toMatchObject({
        CITY: { NAME: "Roma" },
        ADDR: [{ STREET: "Via Appia 200" }],
        ORD: [{ ORD_ID: 2 }],
      });
      expect(verdi).toMatchObject({ CITY: { NAME: "Torino" }, ADDR: [], ORD: [] });
    });

    it("expands on the detail read, with include as an alias, and from a child to its parents", async () => {
      const detail = await get("anna", u("/api/v4/core/CUST/2", { source: "anag-1", include: "CITY,ADDR" }));
      expect(detail.body.data).toMatchObject({
        CUST_ID: 2,
        EMAIL: null,
        CITY: { CITY_ID: "RM" },
        ADDR: [{ ADDR_ID: 3 }],
      });
      const lines = await get("anna", u("/api/v4/core/ORDL", { source: "sales-2", $expand: "ORD,PROD" }));
      expect(
        lines.body.data.map((l) => [
          (l.ORD as Record<string, unknown>).ORD_NO,
          (l.PROD as Record<string, unknown>).NAME,
        ]),
      ).toEqual([
        ["ORD-2026-000001", "Bolt M8"],
        ["ORD-2026-000002", "Nut M8"],
      ]);
    });

    it("refuses unknown relations and targets the caller may not read", async () => {
      expect((await list({ $expand: "NOPE" })).body).toMatchObject({
        status: 400,
        code: "INVALID_PARAMETER",
        field: "$expand",
      });
      expect((await list({ $expand: "ORD" }, "lucia")).status).toBe(200);
      const denied = await list({ $expand: "ADDR" }, "lucia");
      expect(denied.status).toBe(403);
      expect(denied.body).toMatchObject({
        code: "INSUFFICIENT_PERMISSIONS",
        error: "PermissionDenied",
        required_grant: 1,
      });
    });
  });

  describe("TREC", () => {
    it("leaves cancelled records out unless cond_trec or a TREC filter asks for them", async () => {
      expect(await ids({})).toEqual([1, 2, 3]);
      expect(await ids({ cond_trec: "C" })).toEqual([4]);
      expect(await ids({ cond_trec: "N,C" })).toEqual([1, 2, 3, 4]);
      expect(await ids({ "filter[TREC]": "C" })).toEqual([4]);
      expect(await ids({ "filter[TREC][$ne]": "N" })).toEqual([4]);
      expect(await ids({ "filter[TREC][$in]": "N,C" })).toEqual([1, 2, 3, 4]);
      expect(await ids({ $filter: "TREC eq 'C'" })).toEqual([4]);
      expect((await get("anna", u("/api/v4/core/CUST/4", { source: "anag-1" }))).status).toBe(404);
      expect(
        (await get("anna", u("/api/v4/core/CUST/4", { source: "anag-1", cond_trec: "C" }))).body.data,
      ).toMatchObject({
        CUST_ID: 4,
        TREC: "C",
      });
    });
  });

  describe("grouping", () => {
    it("groups with $group or groupBy and aggregates COUNT, SUM, AVG, MIN, MAX", async () => {
      const res = await list({
        $group: "CITY_ID",
        aggregate: "COUNT,SUM(CREDIT_LIMIT),AVG(CREDIT_LIMIT),MIN(NAME),MAX(CREDIT_LIMIT)",
        cond_trec: "N,C",
      });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        data: [
          {
            CITY_ID: "MI",
            COUNT: 2,
            SUM_CREDIT_LIMIT: 50000,
            AVG_CREDIT_LIMIT: 50000,
            MIN_NAME: "Neri Trasporti",
            MAX_CREDIT_LIMIT: 50000,
          },
          {
            CITY_ID: "RM",
            COUNT: 1,
            SUM_CREDIT_LIMIT: 120000,
            AVG_CREDIT_LIMIT: 120000,
            MIN_NAME: "Bianchi SpA",
            MAX_CREDIT_LIMIT: 120000,
          },
          {
            CITY_ID: "TO",
            COUNT: 1,
            SUM_CREDIT_LIMIT: 8000.5,
            AVG_CREDIT_LIMIT: 8000.5,
            MIN_NAME: "Verdi & Figli",
            MAX_CREDIT_LIMIT: 8000.5,
          },
        ],
        meta: { total: 3, num_rows: 100, offset: 0, has_more: false },
      });
      const sorted = await list({ groupBy: "VIP", aggregate: "COUNT", sort: "-COUNT", $num_rows: "1" });
      expect(sorted.body).toEqual({
        data: [{ VIP: false, COUNT: 1 }],
        meta: { total: 3, num_rows: 1, offset: 0, has_more: true },
      });
      const total = await list({ aggregate: "COUNT,SUM(CREDIT_LIMIT)" });
      expect(total.body.data).toEqual([{ COUNT: 3, SUM_CREDIT_LIMIT: 178000.5 }]);
      const empty = await list({ $group: "CITY_ID", "filter[NAME]": "nobody" });
      expect(empty.body).toEqual({ data: [], meta: { total: 0, num_rows: 100, offset: 0, has_more: false } });
    });

    it("$count=none leaves the total out of a grouped list too (has_more still told)", async () => {
      const first = await list({
        $group: "CITY_ID",
        aggregate: "COUNT",
        cond_trec: "N,C",
        $count: "none",
        $num_rows: "2",
      });
      expect(first.status).toBe(200);
      expect(first.body).toEqual({
        data: [
          { CITY_ID: "MI", COUNT: 2 },
          { CITY_ID: "RM", COUNT: 1 },
        ],
        meta: { total: null, num_rows: 2, offset: 0, has_more: true },
      });
      const last = await list({
        $group: "CITY_ID",
        aggregate: "COUNT",
        cond_trec: "N,C",
        $count: "none",
        $num_rows: "2",
        $offset: "2",
      });
      expect(last.body).toEqual({
        data: [{ CITY_ID: "TO", COUNT: 1 }],
        meta: { total: null, num_rows: 2, offset: 2, has_more: false },
      });
      const aggregated = await list({ aggregate: "COUNT", $count: "none" });
      expect(aggregated.body).toEqual({
        data: [{ COUNT: 3 }],
        meta: { total: null, num_rows: 100, offset: 0, has_more: false },
      });
      // With a total asked (the default, or exact), the groups are counted as before.
      const counted = await list({ $group: "CITY_ID", aggregate: "COUNT", $count: "exact", $num_rows: "1" });
      expect(counted.body.meta).toEqual({ total: 3, num_rows: 1, offset: 0, has_more: true });
    });
  });

  describe("debug and named sorts", () => {
    it("returns the SQL and parameters with debug=true to level 4 only", async () => {
      const res = await list({ debug: "true", "filter[NAME]": "Rossi Srl" });
      expect(res.body.debug).toEqual({
        sql: expect.stringContaining(`"TB_ANAG_CUST00"`),
        params: ["acme", "Rossi Srl", 100, 0, 10_001],
      });
      const denied = await list({ debug: "true" }, "marco");
      expect(denied.status).toBe(403);
      expect(denied.body).toMatchObject({ code: "INSUFFICIENT_PERMISSIONS", required_grant: 4 });
      expect((await list({}, "marco")).body).not.toHaveProperty("debug");
    });

    it("lists by a TB_SORT expression on /{dim}/sort/{key}", async () => {
      const res = await get("anna", u("/api/v4/core/ORD/sort/latest", { source: "sales-1" }));
      expect(res.body.data.map((o) => o.ORD_DATE)).toEqual(["20261110", "20261102"]);
      const missing = await get("anna", u("/api/v4/core/ORD/sort/nope", { source: "sales-1" }));
      expect(missing.status).toBe(404);
      expect(missing.body).toMatchObject({ code: "SORT_NOT_FOUND" });
    });
  });

  describe("parameters that would have no effect are refused", () => {
    /** The standard body of a 400 INVALID_PARAMETER naming `field`. */
    const invalidParameter = (field: string, message: string) => ({
      error: "BadRequest",
      message,
      code: "INVALID_PARAMETER",
      status: 400,
      field,
    });

    it("sort or $order on /{dim}/sort/{key}: the named sort orders the list (spec decisions §2, TB_SORT)", async () => {
      for (const name of ["sort", "$order"]) {
        const res = await get(
          "anna",
          u("/api/v4/core/ORD/sort/latest", { source: "sales-1", [name]: "ORD_ID" }),
        );
        expect(res.status).toBe(400);
        expect(res.body).toEqual(
          invalidParameter(
            name,
            `${name} is not taken on /{dim}/sort/{sort_key}: the named sort orders the list. List with GET /{dim}?sort=… for another order.`,
          ),
        );
      }
      // Every other list parameter is taken.
      const paged = await get(
        "anna",
        u("/api/v4/core/ORD/sort/latest", { source: "sales-1", $num_rows: "1" }),
      );
      expect(paged.body.data.map((o) => o.ORD_DATE)).toEqual(["20261110"]);
    });

    it("filter[…] and other list parameters on a detail read", async () => {
      const filtered = await get(
        "anna",
        u("/api/v4/core/CUST/1", { source: "anag-1", "filter[NAME]": "Someone else" }),
      );
      expect(filtered.status).toBe(400);
      expect(filtered.body).toEqual(
        invalidParameter(
          "filter[NAME]",
          "filter[…] applies to lists; a single record is read by its id and takes only $fields, $select, $expand, include, cond_trec and debug (cond_trec=C reads a cancelled one).",
        ),
      );
      const sorted = await get("anna", u("/api/v4/core/CUST/1", { source: "anag-1", sort: "NAME" }));
      expect(sorted.status).toBe(400);
      expect(sorted.body).toEqual(
        invalidParameter(
          "sort",
          "sort applies to lists; a single record is read by its id and takes only $fields, $select, $expand, include, cond_trec and debug (cond_trec=C reads a cancelled one).",
        ),
      );
      // The cancelled record (CUST 4) is read with cond_trec, as the message says.
      expect((await get("anna", u("/api/v4/core/CUST/4", { source: "anag-1", cond_trec: "C" }))).status).toBe(
        200,
      );
    });

    it("sort[] (an array form of sort)", async () => {
      const res = await list({ "sort[]": "-NAME" });
      expect(res.status).toBe(400);
      expect(res.body).toEqual(
        invalidParameter(
          "sort[]",
          "sort[] is not a form of sort: give sort once, as one string (several items separated by commas, e.g. sort=A,B).",
        ),
      );
      const detail = await get("anna", u("/api/v4/core/CUST/1", { source: "anag-1", "include[0]": "CITY" }));
      expect(detail.body).toEqual(
        invalidParameter(
          "include[0]",
          "include[0] is not a form of include: give include once, as one string (several items separated by commas, e.g. include=A,B).",
        ),
      );
    });

    it("$fields (or forceListCost) with $group, groupBy or aggregate", async () => {
      const res = await list({ $group: "CITY_ID", $fields: "CITY_ID" });
      expect(res.status).toBe(400);
      expect(res.body).toEqual(
        invalidParameter(
          "$fields",
          "$fields cannot be combined with $group, groupBy or aggregate: a grouped result's columns are its groups and aggregates.",
        ),
      );
      const forced = await list({ aggregate: "COUNT", forceListCost: "INTERNAL" });
      expect(forced.body).toEqual(
        invalidParameter(
          "forceListCost",
          "forceListCost cannot be combined with $group, groupBy or aggregate: a grouped result's columns are its groups and aggregates.",
        ),
      );
    });

    it("forceListCost naming a field that $fields/$select leaves out (lists, /sort/{key}, /export)", async () => {
      const because = (name: string) =>
        `forceListCost names ${name}, which the field list ($fields or $select; an export's fields) leaves out, so it would not be returned: list ${name} there too, or leave the field list out.`;
      const listed = await list({ forceListCost: "INTERNAL", $fields: "NAME" });
      expect(listed.status).toBe(400);
      expect(listed.body).toEqual(invalidParameter("forceListCost", because("INTERNAL")));
      const selected = await list({ forceListCost: "NAME,INTERNAL", $select: "CUST_ID,NAME" });
      expect(selected.body).toEqual(invalidParameter("forceListCost", because("INTERNAL")));
      const sorted = await get(
        "anna",
        u("/api/v4/core/ORD/sort/latest", {
          source: "sales-1",
          forceListCost: "ORD_DATE",
          $fields: "ORD_ID",
        }),
      );
      expect(sorted.status).toBe(400);
      expect(sorted.body).toEqual(invalidParameter("forceListCost", because("ORD_DATE")));
      const exported = await get(
        "anna",
        u("/api/v4/core/CUST/export", { source: "anag-1", forceListCost: "INTERNAL", fields: "NAME" }),
      );
      expect(exported.status).toBe(400);
      expect(exported.body).toEqual(invalidParameter("forceListCost", because("INTERNAL")));
      // Named in the field list too, the forced field is returned; without a field list, with the rest.
      const both = await list({
        forceListCost: "INTERNAL",
        $fields: "NAME,INTERNAL",
        "filter[CUST_ID]": "1",
      });
      expect(both.status).toBe(200);
      expect(both.body.data).toEqual([{ NAME: "Rossi Srl", INTERNAL: "secret-1" }]);
      const all = await list({ forceListCost: "INTERNAL", $fields: "*", "filter[CUST_ID]": "1" });
      expect(all.body.data[0]).toMatchObject({ NAME: "Rossi Srl", INTERNAL: "secret-1" });
    });

    it("row-shaping list parameters on /{dim}/count (spec 4.2: count with the list filters)", async () => {
      for (const name of [
        "sort",
        "$order",
        "$num_rows",
        "$offset",
        "$fields",
        "$expand",
        "$group",
        "forceListCost",
      ]) {
        const res = await get("anna", u("/api/v4/core/CUST/count", { source: "anag-1", [name]: "NAME" }));
        expect(res.status).toBe(400);
        expect(res.body).toEqual(
          invalidParameter(
            name,
            `${name} does not apply to a count, which takes only the list's filters (filter[…], $filter, $search, cond_trec) and debug.`,
          ),
        );
      }
      // The filters are taken.
      const all = await get("anna", u("/api/v4/core/CUST/count", { source: "anag-1" }));
      const some = await get(
        "anna",
        u("/api/v4/core/CUST/count", { source: "anag-1", "filter[CUST_ID]": "1" }),
      );
      expect(all.status).toBe(200);
      expect(some.status).toBe(200);
      expect(some.body.count as number).toBeLessThan(all.body.count as number);
    });

    it("sort together with $order (two spellings of one parameter)", async () => {
      const res = await list({ sort: "-NAME", $order: "CREDIT_LIMIT DESC" });
      expect(res.status).toBe(400);
      expect(res.body).toEqual(
        invalidParameter(
          "$order",
          "Give the order once: sort or $order, not both (they are two spellings of one parameter).",
        ),
      );
    });
  });

  describe("tenants", () => {
    it("shows each tenant its own records only; another tenant's record is 404", async () => {
      const greta = await get("greta", u("/api/v4/core/CUST", { source: "anag-1" }));
      expect(greta.body.data.map((r) => r.NAME)).toEqual(["Huber GmbH"]);
      const gretaId = greta.body.data[0]!.CUST_ID as number;
      expect((await get("greta", u("/api/v4/core/CUST/1", { source: "anag-1" }))).status).toBe(404);
      expect((await get("anna", u(`/api/v4/core/CUST/${gretaId}`, { source: "anag-1" }))).body).toMatchObject(
        {
          code: "RECORD_NOT_FOUND",
        },
      );
      expect((await get("greta", u("/api/v4/core/CUST/count", { source: "anag-1" }))).body).toMatchObject({
        count: 1,
      });
      expect(
        (await get("greta", u("/api/v4/core/CUST", { source: "anag-1", $expand: "CITY" }))).body.data[0]!
          .CITY,
      ).toMatchObject({ CITY_ID: "MUC", NAME: "Muenchen" });
    });
  });

  describe("errors", () => {
    it("gives every error code of the reads with the standard body", async () => {
      expect((await get(null, u("/api/v4/core/CUST", { source: "anag-1" }))).body).toMatchObject({
        status: 401,
        code: "TOKEN_MISSING",
        error: "AuthenticationError",
      });
      expect((await get("anna", "/api/v4/core/CUST")).body).toMatchObject({
        status: 400,
        code: "MISSING_PARAMETER",
        field: "source",
      });
      expect((await get("anna", u("/api/v4/core/CUST", { source: "anag-2" }))).body).toMatchObject({
        status: 403,
        code: "INSUFFICIENT_PERMISSIONS",
        required_grant: 1,
        details: {
          reason: "source_serves_other_dimension",
          source: "anag-2",
          dimension: "CUST",
          served_dimension: "ADDR",
        },
      });
      expect((await get("lucia", u("/api/v4/core/ADDR", { source: "anag-2" }))).status).toBe(403);
      expect((await get("anna", u("/api/v4/core/NOPE", { source: "erp" }))).body).toEqual({
        error: "NotFound",
        message: "Dimension NOPE does not exist.",
        code: "DIMENSION_NOT_FOUND",
        status: 404,
      });
      for (const id of ["999", "abc", "1;DROP"]) {
        expect(
          (await get("anna", u(`/api/v4/core/CUST/${encodeURIComponent(id)}`, { source: "anag-1" }))).body,
        ).toMatchObject({
          status: 404,
          code: "RECORD_NOT_FOUND",
          error: "NotFound",
        });
      }
      // The body every RECORD_NOT_FOUND has (history, commands, documents, writes).
      expect((await get("anna", u("/api/v4/core/CUST/999", { source: "anag-1" }))).body).toEqual({
        error: "NotFound",
        message: "CUST 999 does not exist.",
        code: "RECORD_NOT_FOUND",
        status: 404,
        details: { dimension: "CUST", id: "999" },
      });
      const badFilter = await list({ $filter: "NAME eq 'x' or CODE xx 3" });
      expect(badFilter.body).toEqual({
        error: "BadRequest",
        message:
          "Invalid $filter: unexpected 'xx' at position 21; expected a comparison (eq, ne, gt, ge, lt, le).",
        code: "INVALID_FILTER",
        status: 400,
        field: "$filter",
        details: { token: "xx", position: 21, expected: "a comparison (eq, ne, gt, ge, lt, le)" },
        errors: [
          {
            field: "$filter",
            message:
              "Invalid $filter: unexpected 'xx' at position 21; expected a comparison (eq, ne, gt, ge, lt, le).",
          },
        ],
      });
      const deep =
        "not (CUST_ID eq 1 and (CUST_ID eq 2 or (CUST_ID eq 3 and (CUST_ID eq 4 or (CUST_ID eq 5 and CUST_ID eq 6)))))";
      expect((await list({ $filter: deep })).body).toMatchObject({
        status: 400,
        code: "FILTER_TOO_COMPLEX",
        details: { depth: 6 },
      });
      const many = Array.from({ length: 21 }, (_, i) => `CUST_ID ne ${i}`).join(" and ");
      expect((await list({ $filter: many })).body).toMatchObject({
        code: "FILTER_TOO_COMPLEX",
        details: { conditions: 21 },
      });
      expect((await list({ $filter: `NAME eq '${"x".repeat(2000)}'` })).body).toMatchObject({
        code: "FILTER_TOO_COMPLEX",
      });
      expect((await list({ $num_rows: "1001" })).body).toMatchObject({
        status: 400,
        code: "INVALID_PARAMETER",
        field: "$num_rows",
      });
      expect((await list({ $offset: "-1" })).body).toMatchObject({
        code: "INVALID_PARAMETER",
        field: "$offset",
      });
      expect((await list({ "filter[NOPE]": "1" })).body).toEqual({
        error: "ValidationError",
        message: "NOPE is not a field of CUST.",
        code: "INVALID_FIELD",
        status: 400,
        field: "NOPE",
      });
      expect((await list({ "filter[CUST_ID]": "abc" })).body).toMatchObject({
        error: "ValidationError",
        code: "INVALID_FIELD_VALUE",
        status: 400,
        field: "CUST_ID",
      });
      expect((await list({ "filter[NOTES]": "x" })).body).toEqual({
        error: "FieldNotSearchable",
        message: "NOTES of CUST is not searchable.",
        code: "FIELD_NOT_SEARCHABLE",
        status: 400,
        field: "NOTES",
      });
      expect((await list({ $group: "EMAIL" })).body).toMatchObject({
        code: "FIELD_NOT_READABLE",
        field: "EMAIL",
      });
    });
  });

  describe("injection attempts", () => {
    const customerRows = async () =>
      Number(
        (await t.services.db.query<{ n: number }>(`SELECT count(*) AS n FROM "TB_ANAG_CUST00"`)).rows[0]!.n,
      );

    it("answer 400 or exactly the right rows, never a 500 and never other rows", async () => {
      const rowsBefore = await customerRows();
      const none: Array<Record<string, string>> = [
        { "filter[NAME]": "' OR '1'='1" },
        { "filter[NAME]": `Rossi Srl'; DROP TABLE "TB_ANAG_CUST00"; --` },
        { "filter[NAME]": "Rossi Srl' --" },
        { "filter[NAME]": "Rossi Srl/*" },
        { "filter[NAME][$like]": "%' OR 1=1 --" },
        { "filter[NAME]": "CUST_ID" },
        { "filter[NAME]": "Rössi Srl" },
        { "filter[NAME]": "Rossi\u202eSrl" },
        { "filter[NAME]": "😀" },
        { "filter[CITY_ID][$in]": "MI') OR ('1'='1" },
        { $filter: "NAME eq 'x'' or ''1''=''1'" },
        { $filter: `NAME eq "x\\" or 1=1 --"` },
        { "filter[TREC]": "N' OR TREC='C" },
      ];
      for (const params of none) {
        const res = await list(params);
        expect(res.status, JSON.stringify(params)).toBe(200);
        expect(res.body.data, JSON.stringify(params)).toEqual([]);
      }
      const refused: Array<[Record<string, string>, string]> = [
        [{ $filter: "NAME eq 'x' or 1 eq 1" }, "INVALID_FILTER"],
        [{ $filter: "NAME eq 'x'; DROP TABLE t" }, "INVALID_FILTER"],
        [{ $filter: "NAME eq 'x' -- comment" }, "INVALID_FILTER"],
        [{ $filter: "NAME eq 'x' /* c */" }, "INVALID_FILTER"],
        [{ $filter: "NAME eq CUST_ID" }, "INVALID_FILTER"],
        [{ $filter: "'Rossi Srl' eq NAME" }, "INVALID_FILTER"],
        [{ $filter: "NAME; eq 'x'" }, "INVALID_FILTER"],
        [{ $filter: "\"NAME\" eq 'x'" }, "INVALID_FILTER"],
        [{ 'filter[NAME"; DROP TABLE x; --]': "1" }, "INVALID_FIELD"],
        [{ "filter[Rossi Srl]": "x" }, "INVALID_FIELD"],
        [{ "filter[ＮＡＭＥ]": "x" }, "INVALID_FIELD"],
        [{ "filter[__proto__]": "x" }, "INVALID_FIELD"],
        [{ "filter[constructor][$eq]": "x" }, "INVALID_FIELD"],
        [{ "filter[NAME][$eq;DROP]": "x" }, "INVALID_FILTER"],
        [{ "filter[CUST_ID]": "1 OR 1=1" }, "INVALID_FIELD_VALUE"],
        [{ "filter[CUST_ID]": "1;DELETE" }, "INVALID_FIELD_VALUE"],
        [{ "filter[NAME]": "a\u0000b" }, "INVALID_FIELD_VALUE"],
        [{ "filter[NAME][$like]": "abc\\" }, "INVALID_FIELD_VALUE"],
        [{ sort: "NAME;DROP TABLE x" }, "INVALID_FIELD"],
        [{ sort: '"NAME"' }, "INVALID_FIELD"],
        [{ $order: "NAME DESC; DROP" }, "INVALID_PARAMETER"],
        [{ $fields: "NAME,(SELECT 1)" }, "INVALID_FIELD"],
        [{ $expand: "CITY;DROP" }, "INVALID_PARAMETER"],
        [{ $group: "CITY_ID)--" }, "INVALID_FIELD"],
        [{ aggregate: "SUM(CREDIT_LIMIT);DROP" }, "INVALID_PARAMETER"],
        [{ $num_rows: "10;DROP" }, "INVALID_PARAMETER"],
        [{ cond_trec: "N') OR ('1" }, "INVALID_PARAMETER"],
      ];
      for (const [params, code] of refused) {
        const res = await list(params);
        expect(res.status, JSON.stringify(params)).toBe(400);
        expect(res.body.code, JSON.stringify(params)).toBe(code);
      }
      // Raw URLs: malformed percent-encoding and lone surrogates reach the parser as text.
      for (const raw of [
        "/api/v4/core/CUST?source=anag-1&filter%5BNAME%5D=%ED%A0%80",
        "/api/v4/core/CUST?source=anag-1&filter%5BNAME%5D=%E0%A4%A",
        "/api/v4/core/CUST?source=anag-1&%24filter=NAME%20eq%20%27%ZZ%27",
      ]) {
        const res = await get("anna", raw);
        expect([200, 400], raw).toContain(res.status);
        if (res.status === 200) expect(res.body.data).toEqual([]);
      }
      expect((await get("anna", u("/api/v4/core/CUST'--", { source: "anag-1" }))).status).toBe(404);
      expect((await get("anna", u("/api/v4/core/CUST", { source: "anag-1' OR '1'='1" }))).status).toBe(403);
      expect(await customerRows()).toBe(rowsBefore);
    });
  });

  describe("metadata reads", () => {
    it("GET /DIM/{dim} answers the TB_DIM row, authenticated and authorised", async () => {
      expect((await get("anna", u("/api/v4/core/DIM/CUST", { source: "anag-1" }))).body).toEqual({
        data: {
          COD_DIM: "CUST",
          DESC_DIM: "Customers",
          TABLE_NAME: "TB_ANAG_CUST00",
          ID_FIELD: "CUST_ID",
          CASCADE_DELETE: "ADDR",
        },
      });
      expect((await get("anna", u("/api/v4/core/DIM/CITY", { source: "anag-3" }))).body.data).toMatchObject({
        CASCADE_DELETE: null,
      });
      expect((await get(null, u("/api/v4/core/DIM/CUST", { source: "anag-1" }))).status).toBe(401);
      expect((await get("anna", u("/api/v4/core/DIM/NOPE", { source: "erp" }))).body).toMatchObject({
        code: "DIMENSION_NOT_FOUND",
      });
      expect((await get("lucia", u("/api/v4/core/DIM/ADDR", { source: "anag-2" }))).status).toBe(403);
    });

    it("GET /VAR and /COST?filter[COD_DIM]= answer TB_VAR and TB_COST rows the caller may know", async () => {
      const vars = await get("anna", u("/api/v4/core/VAR", { source: "anag-1", "filter[COD_DIM]": "CUST" }));
      expect(vars.body.data.map((v) => v.COD_VAR)).toEqual([
        "CUST_ID",
        "CODE",
        "NAME",
        "CITY_ID",
        "EMAIL",
        "CREDIT_LIMIT",
        "VIP",
        "NOTES",
        "RISK_SCORE",
        "SALES_REP",
        "INTERNAL",
      ]);
      expect(vars.body.data[3]).toEqual({
        COD_DIM: "CUST",
        NUM_VAR: 4,
        COD_VAR: "CITY_ID",
        DESC_VAR: "City Id",
        DATA_TYPE: "STRING",
        LENGTH: 10,
        DECIMALS: 2,
        NULLABLE: true,
        TIPO_CAMPO: "AC",
        TIPO_VAR: "CITY",
      });
      const luciaVars = await get(
        "lucia",
        u("/api/v4/core/VAR", { source: "anag-1", "filter[COD_DIM]": "CUST" }),
      );
      expect(luciaVars.body.data.map((v) => v.COD_VAR)).not.toContain("CREDIT_LIMIT");
      const costs = await get(
        "anna",
        u("/api/v4/core/COST", { source: "anag-1", "filter[COD_DIM]": "CUST" }),
      );
      expect(costs.body.data.filter((c) => c.COD_VAR === "SALES_REP")).toEqual([
        expect.objectContaining({ NUM_COST: 10, COD_ON_OFF: "LDRM", CENTER_DETT: null }),
        expect.objectContaining({
          NUM_COST: 100,
          COD_ON_OFF: "LDRNM",
          CENTER_DETT: "nuovo",
          VALUE_TEMP: "{user}",
        }),
      ]);
      expect(costs.body.data.find((c) => c.COD_VAR === "CREDIT_LIMIT")).toMatchObject({ COD_UTENTE: 2 });
      expect((await get("anna", u("/api/v4/core/VAR", { source: "anag-1" }))).body).toMatchObject({
        status: 400,
        code: "MISSING_PARAMETER",
        field: "filter[COD_DIM]",
      });
      expect(
        (
          await get(
            "anna",
            u("/api/v4/core/COST", { source: "anag-1", "filter[COD_VAR]": "X", "filter[COD_DIM]": "CUST" }),
          )
        ).body,
      ).toMatchObject({
        code: "INVALID_FIELD",
      });
      expect(
        (await get("anna", u("/api/v4/core/VAR", { source: "anag-1", "filter[COD_DIM]": "ADDR" }))).status,
      ).toBe(403);
    });

    it("GET /{dim}/fields answers spec 2.4 items for the caller's center_dett and peso", async () => {
      const res = await get("anna", u("/api/v4/core/CUST/fields", { source: "anag-1" }));
      expect(res.status).toBe(200);
      const byCode = new Map(res.body.data.map((f) => [f.cod_var, f]));
      expect(byCode.get("NAME")).toEqual({
        cod_var: "NAME",
        desc_var: "Name",
        data_type: "STRING",
        length: 100,
        cod_on_off: "LDRNM",
        required: true,
        render_hint: "text",
        group_name: "main",
        nullable: false,
        tipo_campo: null,
        tipo_var: null,
      });
      expect(byCode.get("SALES_REP")).toMatchObject({ cod_on_off: "LDRM" });
      expect(byCode.has("INTERNAL")).toBe(false);
      expect(byCode.get("RISK_SCORE")).toMatchObject({ cod_on_off: "R" });
      expect(byCode.get("TREC")).toMatchObject({ cod_on_off: "LDR", data_type: "STRING" });
      const nuovo = await get(
        "anna",
        u("/api/v4/core/CUST/fields", { source: "anag-1", center_dett: "nuovo" }),
      );
      expect(nuovo.body.data.find((f) => f.cod_var === "SALES_REP")).toMatchObject({ cod_on_off: "LDRNM" });
      const lucia = await get("lucia", u("/api/v4/core/CUST/fields", { source: "anag-1" }));
      expect(lucia.body.data.map((f) => f.cod_var)).not.toContain("CREDIT_LIMIT");
      expect((await get("anna", u("/api/v4/core/NOPE/fields", { source: "erp" }))).status).toBe(404);
    });
  });
});
