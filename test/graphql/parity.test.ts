// The same operations through REST and GraphQL on the same data give the same records, the same
// permission answers and the same error codes (issue 9): both call the same resolvers.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loginAs, SAMPLE_USERS } from "../helpers/auth.ts";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";
import { type Client, clientFor, NO_RATE_LIMITS } from "../write/http.ts";
import { type GraphQLReply, graphqlClient } from "./helpers.ts";

type Gql = (query: string, variables?: Record<string, unknown>) => Promise<GraphQLReply>;
const ids = (rows: Array<{ CUST_ID: number }>) => rows.map((r) => r.CUST_ID);

describe.each(BACKENDS)("REST and GraphQL agree (%s)", (backend) => {
  let t: TestApp;
  let rest: Client;
  let gql: Gql;
  let lucia: Gql;
  let greta: Gql;

  beforeAll(async () => {
    t = await createTestApp(backend, { fixture: "sample", env: NO_RATE_LIMITS });
    rest = await clientFor(t.app, "anna");
    gql = graphqlClient(t.app, await loginAs(t.app, "anna", SAMPLE_USERS.anna.password));
    lucia = graphqlClient(t.app, await loginAs(t.app, "lucia", SAMPLE_USERS.lucia.password));
    greta = graphqlClient(t.app, await loginAs(t.app, "greta", SAMPLE_USERS.greta.password));
  });
  afterAll(async () => {
    await t?.close();
  });

  async function restIds(query: string): Promise<number[]> {
    const res = await rest.get(`/api/v4/core/CUST?source=anag-1&sort=CUST_ID&${query}`);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return ids(res.body.data);
  }
  async function gqlIds(where: string): Promise<number[]> {
    const res = await gql(
      `{ CUST(source: "anag-1", where: ${where}, order_by: [{CUST_ID: asc}]) { data { CUST_ID } } }`,
    );
    expect(res.body.errors, JSON.stringify(res.body.errors)).toBeUndefined();
    return ids(res.body.data.CUST.data);
  }

  it("each comparison operator selects the same records", async () => {
    const cases: Array<[string, string]> = [
      ["filter[CITY_ID]=MI", `{CITY_ID: {_eq: "MI"}}`],
      ["filter[CITY_ID][$ne]=MI", `{CITY_ID: {_ne: "MI"}}`],
      ["filter[CREDIT_LIMIT][$gt]=8000.5", `{CREDIT_LIMIT: {_gt: 8000.5}}`],
      ["filter[CREDIT_LIMIT][$gte]=8000.5", `{CREDIT_LIMIT: {_gte: 8000.5}}`],
      ["filter[CREDIT_LIMIT][$lt]=50000", `{CREDIT_LIMIT: {_lt: 50000}}`],
      ["filter[CREDIT_LIMIT][$lte]=50000", `{CREDIT_LIMIT: {_lte: 50000}}`],
      ["filter[CITY_ID][$in]=MI,TO", `{CITY_ID: {_in: ["MI", "TO"]}}`],
      ["filter[CITY_ID][$nin]=MI,TO", `{CITY_ID: {_nin: ["MI", "TO"]}}`],
      ["filter[NAME][$like]=%25i%25", `{NAME: {_like: "%i%"}}`],
      ["filter[CREDIT_LIMIT][$between]=8000,60000", `{CREDIT_LIMIT: {_between: [8000, 60000]}}`],
      [`$filter=${encodeURIComponent("CREDIT_LIMIT eq null")}`, `{CREDIT_LIMIT: {_is_null: true}}`],
      [`$filter=${encodeURIComponent("CREDIT_LIMIT ne null")}`, `{CREDIT_LIMIT: {_is_null: false}}`],
    ];
    for (const [query, where] of cases) {
      const expected = await restIds(query);
      expect(await gqlIds(where), `${query} vs ${where}`).toEqual(expected);
    }
  });

  it("_and, _or, _not and the filter string match $filter", async () => {
    const expr = "(CITY_ID eq 'MI' or CREDIT_LIMIT gt 100000) and not (VIP eq true)";
    const expected = await restIds(`$filter=${encodeURIComponent(expr)}`);
    expect(expected.length).toBeGreaterThan(0);
    const where = `{_and: [{_or: [{CITY_ID: {_eq: "MI"}}, {CREDIT_LIMIT: {_gt: 100000}}]}, {_not: {VIP: {_eq: true}}}]}`;
    expect(await gqlIds(where)).toEqual(expected);
    const res = await gql(
      `query($f: String) { CUST(source: "anag-1", filter: $f, sort: "CUST_ID") { data { CUST_ID } } }`,
      {
        f: expr,
      },
    );
    expect(ids(res.body.data.CUST.data)).toEqual(expected);
  });

  it("order, limit, offset, keyset paging and count", async () => {
    const page = await rest.get("/api/v4/core/CUST?source=anag-1&sort=-NAME&$num_rows=2&$offset=1");
    const res = await gql(
      `{ CUST(source: "anag-1", order_by: [{NAME: desc}], limit: 2, offset: 1) { data { CUST_ID NAME } meta { total num_rows offset has_more } } }`,
    );
    expect(res.body.data.CUST.data).toEqual(
      page.body.data.map((r: { CUST_ID: number; NAME: string }) => ({ CUST_ID: r.CUST_ID, NAME: r.NAME })),
    );
    expect(res.body.data.CUST.meta).toEqual({
      total: page.body.meta.total,
      num_rows: 2,
      offset: 1,
      has_more: page.body.meta.has_more,
    });
    const keyset = await gqlIds(`{CUST_ID: {_gt: 1}}`);
    expect(keyset).toEqual(await restIds("filter[CUST_ID][$gt]=1"));
    const count = await rest.get("/api/v4/core/CUST/count?source=anag-1&filter[CITY_ID]=MI");
    const gcount = await gql(`{ CUST_count(source: "anag-1", where: {CITY_ID: {_eq: "MI"}}) }`);
    expect(gcount.body.data.CUST_count).toBe(count.body.count);
    // Without total selected, none is counted (null), has_more still told.
    const noTotal = await gql(`{ CUST(source: "anag-1", limit: 1) { meta { num_rows has_more } } }`);
    expect(noTotal.body.data.CUST.meta).toEqual({ num_rows: 1, has_more: true });
  });

  it("aggregates equal REST $group/aggregate", async () => {
    const viaRest = await rest.get(
      "/api/v4/core/CUST?source=anag-1&$group=CITY_ID&aggregate=COUNT,SUM(CREDIT_LIMIT)&sort=CITY_ID",
    );
    expect(viaRest.status).toBe(200);
    const viaGql = await gql(
      `{ CUST_aggregate(source: "anag-1", group_by: ["CITY_ID"], aggregate: [{fn: COUNT}, {fn: SUM, field: "CREDIT_LIMIT"}], order_by: "CITY_ID") { data meta { total num_rows offset has_more } } }`,
    );
    expect(viaGql.body.data.CUST_aggregate).toEqual({ data: viaRest.body.data, meta: viaRest.body.meta });
    const bad = await gql(
      `{ CUST_aggregate(source: "anag-1", group_by: ["CITY_ID"], aggregate: [{fn: SUM}]) { data } }`,
    );
    expect(bad.body.errors[0].extensions).toMatchObject({ code: "INVALID_PARAMETER", status: 400 });
  });

  it("relations both ways equal REST $expand", async () => {
    const restOne = await rest.get("/api/v4/core/CUST/1?source=anag-1&$expand=CITY,ADDR");
    const res = await gql(
      `{ CUST_by_id(source: "anag-1", id: "1") { CUST_ID CITY { CITY_ID NAME } ADDR { ADDR_ID KIND } } }`,
    );
    const one = res.body.data.CUST_by_id;
    expect(one.CITY).toEqual({ CITY_ID: restOne.body.data.CITY.CITY_ID, NAME: restOne.body.data.CITY.NAME });
    expect(one.ADDR).toEqual(
      restOne.body.data.ADDR.map((a: { ADDR_ID: number; KIND: string }) => ({
        ADDR_ID: a.ADDR_ID,
        KIND: a.KIND,
      })),
    );
    expect(one.ADDR.length).toBeGreaterThan(0);
  });

  it("create, update (PUT), patch, soft delete and force delete give what REST reads back", async () => {
    const created = await gql(
      `mutation { CUST_create(source: "anag-1", data: {NAME: "Graph Srl", CITY_ID: "MI", CREDIT_LIMIT: 10}) { data { CUST_ID NAME TREC } message event_id } }`,
    );
    expect(created.body.errors).toBeUndefined();
    const id = created.body.data.CUST_create.data.CUST_ID;
    expect(created.body.data.CUST_create).toMatchObject({
      data: { NAME: "Graph Srl", TREC: "N" },
      message: `CUST ${id} created.`,
    });
    expect(created.body.data.CUST_create.event_id).toMatch(/^\d+$/);
    const read = await rest.get(`/api/v4/core/CUST/${id}?source=anag-1`);
    expect(read.body.data).toMatchObject({ NAME: "Graph Srl", CITY_ID: "MI", CREDIT_LIMIT: 10 });

    const patched = await gql(
      `mutation { CUST_patch(source: "anag-1", id: "${id}", data: {CREDIT_LIMIT: 20}) { data { CREDIT_LIMIT TREC } } }`,
    );
    expect(patched.body.data.CUST_patch.data).toEqual({ CREDIT_LIMIT: 20, TREC: "M" });
    expect((await rest.get(`/api/v4/core/CUST/${id}?source=anag-1`)).body.data.CITY_ID).toBe("MI");

    const put = await gql(
      `mutation { CUST_update(source: "anag-1", id: "${id}", data: {NAME: "Graph 2"}) { data { NAME CITY_ID } } }`,
    );
    expect(put.body.errors).toBeUndefined();
    // PUT semantics: M fields left out are cleared, as REST does.
    expect((await rest.get(`/api/v4/core/CUST/${id}?source=anag-1`)).body.data).toMatchObject({
      NAME: "Graph 2",
      CITY_ID: null,
    });

    const soft = await gql(
      `mutation { CUST_delete(source: "anag-1", id: "${id}") { data { CUST_ID TREC } message } }`,
    );
    expect(soft.body.data.CUST_delete).toEqual({
      data: { CUST_ID: id, TREC: "C" },
      message: `CUST ${id} deleted.`,
    });
    expect((await rest.get(`/api/v4/core/CUST/${id}?source=anag-1`)).status).toBe(404);
    const force = await gql(
      `mutation { CUST_delete(source: "anag-1", id: "${id}", force: true) { data { CUST_ID } message } }`,
    );
    expect(force.body.data.CUST_delete).toEqual({ data: null, message: `CUST ${id} permanently deleted.` });
    const gone = await t.services.db.query(`SELECT 1 FROM "TB_ANAG_CUST00" WHERE "CUST_ID" = $1`, [id]);
    expect(gone.rows).toEqual([]);
  });

  it("a batch create with a bad record reports it like REST; `batch` rolls back whole", async () => {
    const items = [{ NAME: "B1" }, { CODE: "X" }, { NAME: "B3" }];
    const viaRest = await rest.post("/api/v4/core/CUST/batch?source=anag-1", { data: items });
    const viaGql = await gql(
      `mutation($d: [CUST_create_input!]!) { CUST_batch_create(source: "anag-1", data: $d) { success failed results { index status error { code field } } } }`,
      { d: items },
    );
    const shape = (r: { index: number; status: string; error?: { code: string; field?: string } }) => ({
      index: r.index,
      status: r.status,
      error: r.error ? { code: r.error.code, field: r.error.field ?? null } : null,
    });
    expect(viaGql.body.data.CUST_batch_create.results).toEqual(viaRest.body.results.map(shape));
    expect(viaGql.body.data.CUST_batch_create).toMatchObject({ success: 2, failed: 1 });

    const before = (await rest.get("/api/v4/core/CUST/count?source=anag-1")).body.count;
    const batch = await gql(`mutation($ops: [BatchOperation!]!) { batch(operations: $ops) { index id } }`, {
      ops: [
        { method: "POST", dim: "CUST", source: "anag-1", data: { NAME: "Kept?" } },
        { method: "PATCH", dim: "CUST", source: "anag-1", id: "999999", data: { NAME: "x" } },
      ],
    });
    expect(batch.body.errors[0].extensions).toMatchObject({ code: "RECORD_NOT_FOUND", status: 404 });
    expect((await rest.get("/api/v4/core/CUST/count?source=anag-1")).body.count).toBe(before);
  });

  it("cascaded changes: the mutation result's `cascaded` is REST's, in single writes and `batch`", async () => {
    const withAddresses = async (n: number) => {
      const c = await rest.post("/api/v4/core/CUST?source=anag-1", { data: { NAME: "Cascade Parity" } });
      const addrIds: number[] = [];
      for (let i = 0; i < n; i++) {
        const a = await rest.post("/api/v4/core/ADDR?source=anag-2", {
          data: { CUST_ID: c.body.data.CUST_ID, KIND: `K${i}` },
        });
        addrIds.push(a.body.data.ADDR_ID);
      }
      return { custId: c.body.data.CUST_ID as number, addrIds };
    };
    // REST's items with the id as GraphQL's ID sends it, and without the event (each its own).
    type Change = { dimension: string; id: unknown; action: string; trec: string | null; event_id: string };
    const shape = (list: Change[]) => list.map((c) => ({ ...c, id: String(c.id), event_id: "e" }));
    const selection = "cascaded { dimension id action trec event_id }";

    for (const force of [false, true]) {
      const viaRest = await withAddresses(2);
      const viaGql = await withAddresses(2);
      const restRes = await rest.delete(`/api/v4/core/CUST/${viaRest.custId}?source=anag-1&force=${force}`);
      const gqlRes = await gql(
        `mutation { CUST_delete(source: "anag-1", id: "${viaGql.custId}", force: ${force}) { event_id ${selection} } }`,
      );
      expect(gqlRes.body.errors, JSON.stringify(gqlRes.body.errors)).toBeUndefined();
      const cascaded: Change[] = gqlRes.body.data.CUST_delete.cascaded;
      expect(cascaded.map((c) => c.id)).toEqual(viaGql.addrIds.map(String));
      expect(shape(cascaded)).toEqual(
        shape(restRes.body.cascaded).map((c, i) => ({ ...c, id: String(viaGql.addrIds[i]) })),
      );
      // Each change's own event, after the write's.
      const events = cascaded.map((c) => Number(c.event_id));
      expect(events[0]).toBeGreaterThan(Number(gqlRes.body.data.CUST_delete.event_id));
      expect(events[1]).toBeGreaterThan(events[0]!);
    }

    // None: an empty list (REST leaves the member out).
    const plain = await withAddresses(0);
    const patched = await gql(
      `mutation { CUST_patch(source: "anag-1", id: "${plain.custId}", data: {NOTES: "n"}) { ${selection} } }`,
    );
    expect(patched.body.data.CUST_patch.cascaded).toEqual([]);

    const ops = (custId: number) => [
      { method: "PATCH", dim: "CUST", source: "anag-1", id: String(custId), data: { NOTES: "x" } },
      { method: "DELETE", dim: "CUST", source: "anag-1", id: String(custId) },
    ];
    const viaRest = await withAddresses(1);
    const viaGql = await withAddresses(1);
    const restBatch = await rest.post("/api/v4/core/batch?source=anag-1", {
      operations: ops(viaRest.custId),
    });
    const gqlBatch = await gql(
      `mutation($ops: [BatchOperation!]!) { batch(operations: $ops) { index ${selection} } }`,
      { ops: ops(viaGql.custId) },
    );
    expect(gqlBatch.body.errors, JSON.stringify(gqlBatch.body.errors)).toBeUndefined();
    expect(gqlBatch.body.data.batch[0].cascaded).toEqual([]);
    expect(restBatch.body.results[0].cascaded).toBeUndefined();
    expect(gqlBatch.body.data.batch[1].cascaded[0].id).toBe(String(viaGql.addrIds[0]));
    expect(shape(gqlBatch.body.data.batch[1].cascaded)).toEqual(
      shape(restBatch.body.results[1].cascaded).map((c) => ({ ...c, id: String(viaGql.addrIds[0]) })),
    );
  });

  it("an insert-cascade child's error names its place, as REST does", async () => {
    const cases: Array<[string, Record<string, unknown>]> = [
      ["second line without QTY", { CUST_ID: 1, ORDL: [{ PROD_ID: "P0001", QTY: 1 }, { PROD_ID: "P0001" }] }],
      ["unknown product", { CUST_ID: 1, ORDL: [{ PROD_ID: "NOPE", QTY: 1 }] }],
    ];
    for (const [label, data] of cases) {
      const viaRest = await rest.post("/api/v4/core/ORD?source=sales-1", { data });
      const viaGql = await gql(
        `mutation($d: ORD_create_input!) { ORD_create(source: "sales-1", data: $d) { message } }`,
        { d: data },
      );
      const ext = viaGql.body.errors?.[0]?.extensions;
      expect(viaRest.body.field, label).toMatch(/^ORDL\[\d\]\./);
      expect(ext, label).toMatchObject({ code: viaRest.body.code, status: viaRest.status });
      expect(ext.field, label).toBe(viaRest.body.field);
    }
  });

  it("field rules give the same code and field", async () => {
    const cases: Array<[string, Record<string, unknown>]> = [
      ["NAME missing", { CODE: "C1" }],
      ["RISK_SCORE not allowed on create", { NAME: "n", RISK_SCORE: 3 }],
      ["wrong type", { NAME: "n", CREDIT_LIMIT: "lots" }],
      ["unknown foreign key", { NAME: "n", CITY_ID: "NOPE" }],
    ];
    for (const [label, data] of cases) {
      const viaRest = await rest.post("/api/v4/core/CUST?source=anag-1", { data });
      const viaGql = await gql(
        `mutation($d: CUST_create_input!) { CUST_create(source: "anag-1", data: $d) { message } }`,
        {
          d: data,
        },
      );
      const ext = viaGql.body.errors?.[0]?.extensions;
      expect(ext, label).toMatchObject({ code: viaRest.body.code, status: viaRest.status });
      expect(ext.field, label).toBe(viaRest.body.field);
    }
  });

  // What the caller's schema shows is decided per request too: a source that does not serve the
  // dimension (what the schema leaves out altogether is in test/graphql/schema-profiles.test.ts).
  it("permissions: the same 403 and required_grant", async () => {
    const restMarco = await clientFor(t.app, "marco");
    const marco = graphqlClient(t.app, await loginAs(t.app, "marco", SAMPLE_USERS.marco.password));
    const viaRest = await restMarco.post("/api/v4/core/CUST?source=anag-2", { data: { NAME: "n" } });
    const viaGql = await marco(`mutation { CUST_create(source: "anag-2", data: {NAME: "n"}) { message } }`);
    expect(viaRest.status).toBe(403);
    expect(viaGql.body.errors[0].extensions).toMatchObject({
      code: "INSUFFICIENT_PERMISSIONS",
      status: 403,
      required_grant: viaRest.body.required_grant,
    });
    const restLucia = await clientFor(t.app, "lucia");
    const readRest = await restLucia.get("/api/v4/core/CUST?source=sales-1");
    const read = await lucia(`{ CUST(source: "sales-1") { data { CUST_ID } } }`);
    expect(readRest.status).toBe(403);
    expect(read.body.errors[0].extensions).toMatchObject({
      code: "INSUFFICIENT_PERMISSIONS",
      status: 403,
      required_grant: readRest.body.required_grant,
    });
  });

  it("another tenant's record is null by id and absent from lists", async () => {
    const huber = await greta(`{ CUST(source: "anag-1") { data { CUST_ID NAME } } }`);
    const [own] = huber.body.data.CUST.data;
    expect(own.NAME).toBe("Huber GmbH");
    const byId = await gql(`{ CUST_by_id(source: "anag-1", id: "${own.CUST_ID}") { NAME } }`);
    expect(byId.body).toEqual({ data: { CUST_by_id: null } });
    const list = await gql(`{ CUST(source: "anag-1", limit: 1000) { data { NAME } } }`);
    expect(list.body.data.CUST.data.map((c: { NAME: string }) => c.NAME)).not.toContain("Huber GmbH");
  });
});
