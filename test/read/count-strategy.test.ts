// meta.total (decisions §11): exact while a bounded count finds at most COUNT_EXACT_LIMIT matches,
// the planner's estimate beyond it (total_estimated: true); $count=exact and $count=none; /count
// always exact; GraphQL the same through PageMeta.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loginAs, SAMPLE_USERS } from "../helpers/auth.ts";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";
import { graphqlClient } from "../graphql/helpers.ts";
import { type Client, clientFor, NO_RATE_LIMITS } from "../write/http.ts";

describe.each(BACKENDS)("counting strategy (%s)", (backend) => {
  let t: TestApp;
  let anna: Client;
  let exactTotal: number;

  beforeAll(async () => {
    t = await createTestApp(backend, {
      fixture: "sample",
      env: { ...NO_RATE_LIMITS, COUNT_EXACT_LIMIT: "5" },
    });
    anna = await clientFor(t.app, "anna");
    const created = await anna.post("/api/v4/core/CUST/batch?source=anag-1", {
      data: Array.from({ length: 30 }, (_, i) => ({ NAME: `Count ${i}`, CITY_ID: "RM" })),
    });
    expect(created.body.success).toBe(30);
    await t.services.db.query(`ANALYZE "TB_ANAG_CUST00"`);
    exactTotal = (await anna.get("/api/v4/core/CUST/count?source=anag-1")).body.count;
    expect(exactTotal).toBe(34);
  });
  afterAll(async () => {
    await t?.close();
  });

  it("beyond the bound the total is the planner's estimate, flagged", async () => {
    const res = await anna.get("/api/v4/core/CUST?source=anag-1&$num_rows=2");
    expect(res.status).toBe(200);
    expect(res.body.meta).toMatchObject({ total_estimated: true, num_rows: 2, offset: 0, has_more: true });
    // Never below what the bounded count saw (bound + 1).
    expect(res.body.meta.total).toBeGreaterThanOrEqual(6);
  });

  it("within the bound it is exact and not flagged", async () => {
    const res = await anna.get("/api/v4/core/CUST?source=anag-1&filter[CITY_ID]=MI&$num_rows=1");
    expect(res.body.meta).toEqual({ total: 2, num_rows: 1, offset: 0, has_more: true });
  });

  it("$count=exact counts everything; $count=none counts nothing; a bad mode is 400", async () => {
    const exact = await anna.get("/api/v4/core/CUST?source=anag-1&$num_rows=2&$count=exact");
    expect(exact.body.meta).toEqual({ total: exactTotal, num_rows: 2, offset: 0, has_more: true });
    const none = await anna.get("/api/v4/core/CUST?source=anag-1&$num_rows=2&$count=none");
    expect(none.body.meta).toEqual({ total: null, num_rows: 2, offset: 0, has_more: true });
    const bad = await anna.get("/api/v4/core/CUST?source=anag-1&$count=maybe");
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ code: "INVALID_PARAMETER", field: "$count" });
  });

  it("GraphQL's PageMeta follows the same rule", async () => {
    const gql = graphqlClient(t.app, await loginAs(t.app, "anna", SAMPLE_USERS.anna.password));
    const res = await gql(`{ CUST(source: "anag-1", limit: 2) { meta { total total_estimated has_more } } }`);
    expect(res.body.data.CUST.meta.total_estimated).toBe(true);
    expect(res.body.data.CUST.meta.total).toBeGreaterThanOrEqual(6);
    const few = await gql(
      `{ CUST(source: "anag-1", where: {CITY_ID: {_eq: "MI"}}) { meta { total total_estimated } } }`,
    );
    expect(few.body.data.CUST.meta).toEqual({ total: 2, total_estimated: null });
  });
});
