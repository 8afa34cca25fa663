// meta.total of a list page: counted only when the page cannot tell it. A page shorter than the
// limit is the last one (total = offset + its rows); a full page, or one past the end, counts.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compileRecordsPage } from "../../src/query/compile.ts";
import { planList } from "../../src/query/plan.ts";
import { parseListParams } from "../../src/query/rest-params.ts";
import { createReadContext, listRecords } from "../../src/resolvers/read/index.ts";
import type { Services } from "../../src/services.ts";
import { BACKENDS, createTestServices } from "../helpers/env.ts";
import { authorizedDimension, handContext } from "./support.ts";

describe.each(BACKENDS)("list totals (%s)", (backend) => {
  let services: Services;
  beforeAll(async () => {
    services = await createTestServices(backend, { fixture: "sample" });
  });
  afterAll(async () => {
    await services?.close();
  });

  const list = (query: Record<string, string>) =>
    listRecords(
      createReadContext({ db: services.db, metadata: services.metadata }, handContext()),
      "CUST",
      parseListParams(query),
    );

  // acme has 4 live customers (ids 1..4).
  it.each([
    [{}, 4, 4, false],
    [{ $num_rows: "2" }, 4, 2, true],
    [{ $num_rows: "2", $offset: "2" }, 4, 2, false],
    [{ $num_rows: "3", $offset: "3" }, 4, 1, false],
    [{ $num_rows: "4" }, 4, 4, false],
    [{ $num_rows: "2", $offset: "10" }, 4, 0, false],
    [{ $num_rows: "0" }, 4, 0, true],
    [{ "filter[NAME]": "nobody" }, 0, 0, false],
    [{ "filter[NAME]": "nobody", $offset: "5" }, 0, 0, false],
  ])("%j: total %i, %i rows, has_more %s", async (query, total, rows, hasMore) => {
    const page = await list(query);
    expect(page.meta).toMatchObject({ total, has_more: hasMore });
    expect(page.data.length).toBe(rows);
  });

  if (backend === "postgres") {
    it("the count is never executed for a last page, and is for a full one", async () => {
      const explain = async (query: Record<string, string>) => {
        const model = services.metadata.current();
        const plan = planList(
          handContext(),
          model,
          authorizedDimension(model, "CUST"),
          parseListParams(query),
        );
        if (plan.kind !== "records") throw new Error("expected a records plan");
        const q = compileRecordsPage(plan);
        const res = await services.db.query<{ "QUERY PLAN": string }>(
          `EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) ${q.text}`,
          q.params,
        );
        return res.rows.map((r) => r["QUERY PLAN"]).join("\n");
      };
      const initPlan = (text: string) => text.slice(text.indexOf("InitPlan"), text.indexOf("Nested Loop"));
      expect(initPlan(await explain({ $num_rows: "10" }))).toMatch(/Aggregate \(never executed\)/);
      expect(initPlan(await explain({ $num_rows: "2" }))).toMatch(/Aggregate \(actual rows=1 loops=1\)/);
    });
  }
});
