// The read resolvers called directly, as GraphQL will call them: batching of expansions, index use of
// keyset pages, compiled serialisation, and results over a real database.
import { databaseApiError } from "../../src/db/errors.ts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ApiError } from "../../src/errors.ts";
import { compileRecordsPage } from "../../src/query/compile.ts";
import { planList } from "../../src/query/plan.ts";
import { parseListParams } from "../../src/query/rest-params.ts";
import { emptyListQuery, emptyRecordQuery } from "../../src/query/types.ts";
import { runQuery } from "../../src/resolvers/read/common.ts";
import {
  countRecords,
  createReadContext,
  describeDimension,
  describeFields,
  getRecord,
  listRecords,
  loadRelated,
  type ReadContext,
} from "../../src/resolvers/read/index.ts";
import { createReadSerializers } from "../../src/rest/response/serializers.ts";
import type { Services } from "../../src/services.ts";
import type { Queryable } from "../../src/types.ts";
import { BACKENDS, createTestServices } from "../helpers/env.ts";
import { authorizedDimension, handContext } from "./support.ts";

function params(query: string) {
  const out = Object.create(null) as Record<string, string>;
  for (const [k, v] of new URLSearchParams(query)) out[k] = v;
  return out;
}

describe.each(BACKENDS)("read resolvers (%s)", (backend) => {
  let services: Services;
  const statements: string[] = [];

  /** The real database, counting the statements it is sent. */
  const counting = (): Queryable => ({
    query(text, values) {
      statements.push(text);
      return services.db.query(text, values);
    },
  });

  function context(overrides: Parameters<typeof handContext>[0] = {}): ReadContext {
    return createReadContext({ db: counting(), metadata: services.metadata }, handContext(overrides));
  }

  beforeAll(async () => {
    services = await createTestServices(backend, { fixture: "sample" });
    await services.db.query(
      `INSERT INTO "TB_ANAG_CUST00" ("NAME", "CODE", "TREC", "CDATA", "OWNER", "TENANT_ID")
       SELECT 'Bulk ' || g, 'B-' || g, 'N', '20260101000000', 'test', 'acme' FROM generate_series(1, 200) AS g`,
    );
  });

  afterAll(async () => {
    await services?.close();
  });

  it("answers a page with its total and its forward relations in one statement, each reverse relation in one more", async () => {
    const rc = context();
    statements.length = 0;
    const result = await listRecords(
      rc,
      "CUST",
      parseListParams(params("$expand=CITY,ADDR,ORD&$num_rows=50")),
    );
    expect(result.kind).toBe("records");
    expect(result.data).toHaveLength(50);
    expect(result.meta).toEqual({ total: 204, num_rows: 50, offset: 0, has_more: true });
    // The page with its total and the city joined in (a forward relation), then one statement for
    // each reverse relation (addresses, orders).
    expect(statements).toHaveLength(3);
    expect(statements[0]).toContain(`LEFT JOIN LATERAL (SELECT t."CITY_ID"`);
    expect(statements.filter((s) => s.includes(`"TB_ANAG_ADDR00"`))).toHaveLength(1);
    expect(result.data[0]).toMatchObject({
      CITY: { NAME: "Milano" },
      ADDR: [{ KIND: "BILL" }, { KIND: "SHIP" }],
    });
  });

  it("a forward relation joined into the page gives what the relation's loader gives, null when the key names no live record", async () => {
    // One customer whose city is soft-deleted and one without a city, beside the sample's.
    await services.db.query(
      `INSERT INTO "TB_ANAG_CITY00" ("CITY_ID", "NAME", "COUNTRY", "TREC", "CDATA", "OWNER", "TENANT_ID")
       VALUES ('GONE', 'Gone', 'IT', 'C', '20260101000000', 'test', 'acme')`,
    );
    await services.db.query(
      `INSERT INTO "TB_ANAG_CUST00" ("NAME", "CODE", "CITY_ID", "TREC", "CDATA", "OWNER", "TENANT_ID")
       VALUES ('Joined 1', 'J-1', 'GONE', 'N', '20260101000000', 'test', 'acme')`,
    );
    try {
      await expectJoinedEqualsLoaded();
    } finally {
      await services.db.query(`DELETE FROM "TB_ANAG_CUST00" WHERE "CODE" = 'J-1'`);
      await services.db.query(`DELETE FROM "TB_ANAG_CITY00" WHERE "CITY_ID" = 'GONE'`);
    }
  });

  async function expectJoinedEqualsLoaded() {
    for (const withTotal of [true, false]) {
      const page = await listRecords(context(), "CUST", {
        ...parseListParams(params("$expand=CITY&$num_rows=300")),
        withTotal,
      });
      expect(page.data.length).toBeGreaterThan(200);
      const byLoader = await Promise.all(
        page.data.map((r) => loadRelated(context(), "CUST", "CITY", r.CITY_ID ?? null)),
      );
      expect(page.data.map((r) => r.CITY)).toEqual(byLoader);
      expect(page.data.filter((r) => r.CITY !== null).length).toBeGreaterThan(0);
      expect(page.data.find((r) => r.NAME === "Joined 1")?.CITY).toBeNull();
    }
  }

  it("pages without a total when none is asked for (withTotal false): one statement, has_more from an extra row", async () => {
    const rc = context();
    statements.length = 0;
    const page = await listRecords(rc, "CUST", {
      ...parseListParams(params("$num_rows=3&$offset=201")),
      withTotal: false,
    });
    expect(statements).toHaveLength(1);
    expect(statements[0]).not.toContain("count(*)");
    expect(page.data.map((r) => r.CUST_ID)).toEqual([203, 204, 205]);
    expect(page.meta).toEqual({ total: null, num_rows: 3, offset: 201, has_more: false });
    const more = await listRecords(rc, "CUST", {
      ...parseListParams(params("$num_rows=3&$offset=200")),
      withTotal: false,
    });
    expect(more.meta).toEqual({ total: null, num_rows: 3, offset: 200, has_more: true });
    expect(JSON.parse(createReadSerializers().list(rc.model.version, more)).meta).toEqual(more.meta);
  });

  it("batches loadRelated calls of the same tick into one query (GraphQL field resolvers)", async () => {
    const rc = context();
    statements.length = 0;
    const [a, b, c] = await Promise.all([
      loadRelated(rc, "CUST", "ADDR", 1),
      loadRelated(rc, "CUST", "ADDR", 2),
      loadRelated(rc, "CUST", "ADDR", 3),
    ]);
    expect(statements).toHaveLength(1);
    expect((a as unknown[]).length).toBe(2);
    expect(b).toEqual([expect.objectContaining({ STREET: "Via Appia 200" })]);
    expect(c).toEqual([]);
    expect(await loadRelated(rc, "CUST", "CITY", "RM")).toMatchObject({ NAME: "Roma" });
    expect(await loadRelated(rc, "CUST", "CITY", null)).toBeNull();
  });

  it("pages by keyset through the primary key index", async () => {
    const ctx = handContext();
    const model = services.metadata.current();
    const plan = planList(
      ctx,
      model,
      authorizedDimension(model, "CUST"),
      parseListParams(params("sort=CUST_ID&filter[CUST_ID][$gt]=150&$num_rows=20")),
    );
    if (plan.kind !== "records") throw new Error("records plan expected");
    const q = compileRecordsPage(plan);
    const explained = await services.db.transaction(async (tx) => {
      // The table is small, so the planner would rightly scan it; forbid that to see that the
      // keyset condition and order are served by the index.
      await tx.query("SET LOCAL enable_seqscan = off");
      return tx.query<{ "QUERY PLAN": string }>(`EXPLAIN ${q.text}`, q.params);
    });
    const text = explained.rows.map((r) => r["QUERY PLAN"]).join("\n");
    expect(text).toMatch(/Index (Only )?Scan using "?TB_ANAG_CUST00_pk"?/);
    expect(text).toMatch(/Index Cond: .*"CUST_ID" > /);
    const page = await listRecords(
      context(),
      "CUST",
      parseListParams(params("sort=CUST_ID&filter[CUST_ID][$gt]=150&$num_rows=20")),
    );
    expect(page.data.map((r) => r.CUST_ID)).toEqual(Array.from({ length: 20 }, (_, i) => 151 + i));
  });

  it("serialises results with compiled, cached serializers identical to JSON", async () => {
    const serializers = createReadSerializers(2);
    const rc = context();
    const version = rc.model.version;
    const list = await listRecords(rc, "CUST", parseListParams(params("$expand=CITY,ADDR&$num_rows=3")));
    const listJson = JSON.parse(serializers.list(version, list));
    expect(listJson).toEqual({ data: list.data, meta: list.meta });
    const record = await getRecord(context({ source: "catalog-1" }), "PROD", "P0001", emptyRecordQuery());
    expect(record.data).toMatchObject({ SPECS: { din: 933 }, UNIT_PRICE: 0.12 });
    expect(JSON.parse(serializers.record(version, record))).toEqual({ data: record.data });
    const groups = await listRecords(
      rc,
      "CUST",
      parseListParams(params("$group=CITY_ID&aggregate=COUNT,MIN(NAME)")),
    );
    expect(JSON.parse(serializers.list(version, groups))).toEqual({ data: groups.data, meta: groups.meta });
    expect(serializers.size()).toBe(2);
    serializers.list(version, list);
    expect(serializers.size()).toBe(2);
  });

  it("answers count, dimension and field descriptions as plain data", async () => {
    const rc = context();
    const counted = await countRecords(rc, "CUST", emptyListQuery());
    expect(counted).toMatchObject({ count: 204, dimension: "CUST", filter: { kind: "live" } });
    expect(await describeDimension(rc, "CUST")).toMatchObject({ COD_DIM: "CUST", ID_FIELD: "CUST_ID" });
    const fields = await describeFields(context({ centerDett: "nuovo" }), "CUST");
    expect(fields.find((f) => f.cod_var === "SALES_REP")).toMatchObject({ cod_on_off: "LDRNM" });
  });

  it("a value the database refuses maps to a 400 (src/db/errors.ts, once for REST and GraphQL)", async () => {
    const rc = context();
    const refused = await runQuery(rc, { text: "SELECT 'x'::int AS n", params: [] }).catch((e: unknown) => e);
    expect(refused).not.toBeInstanceOf(ApiError);
    expect(databaseApiError(refused)).toMatchObject({ status: 400, code: "INVALID_FIELD_VALUE" });
    const drift = await runQuery(rc, { text: "SELECT * FROM no_such_table", params: [] }).catch(
      (e: unknown) => e,
    );
    expect(databaseApiError(drift)).toMatchObject({ status: 503, code: "METADATA_CHANGED" });
  });

  it("checks the grant on the source first: 403, and 404 for an unknown dimension", async () => {
    await expect(listRecords(context({ source: "anag-2" }), "CUST", emptyListQuery())).rejects.toMatchObject({
      status: 403,
    });
    await expect(listRecords(context({ source: null }), "CUST", emptyListQuery())).rejects.toMatchObject({
      status: 400,
      code: "MISSING_PARAMETER",
    });
    await expect(getRecord(context(), "NOPE", 1, emptyRecordQuery())).rejects.toMatchObject({
      code: "DIMENSION_NOT_FOUND",
    });
  });
});
