// `$search` on the embedded database (issue 18 §3): with 1,200 records and no planner statistics
// (PGlite never gathers them itself) a search request is planned as one read of the search index
// into a hash (a hashed SubPlan), never as a nested loop that rescans the index per record; its
// results are the right ones; and the statistics job analyzes the changed tables.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startStatisticsJob } from "../../src/db/statistics.ts";
import { type EventRuntime, startEventRuntime } from "../../src/events/runtime.ts";
import { createTestApp, type TestApp } from "../helpers/env.ts";
import { type Client, clientFor, NO_RATE_LIMITS } from "../write/http.ts";
import { eventually } from "./support.ts";

const RECORDS = 1200;
/** Every 50th record has the rare word; all but every 25th the common one. */
const nameOf = (i: number) =>
  `Firm ${i} ${i % 50 === 0 ? "zanzibar" : "ordinary"} ${i % 25 === 0 ? "" : "common"}`.trim();

describe("$search planned without statistics (embedded database)", () => {
  let t: TestApp;
  let anna: Client;
  let runtime: EventRuntime;
  const idsByName = new Map<string, number>();
  /** The statements (with their parameters) of the service's reads, while `capturing`. */
  const captured: Array<{ text: string; params: unknown[] }> = [];
  let capturing = false;

  beforeAll(async () => {
    t = await createTestApp("pglite", {
      fixture: "sample",
      env: { ...NO_RATE_LIMITS, EVENTS_POLL_MS: "60000" },
    });
    anna = await clientFor(t.app, "anna");
    runtime = await startEventRuntime(t.services, { relay: true, subscribers: true });
    for (let from = 0; from < RECORDS; from += 400) {
      const data = Array.from({ length: 400 }, (_, k) => ({ NAME: nameOf(from + k) }));
      const res = await anna.post("/api/v4/core/CUST/batch?source=anag-1", { data });
      expect(res.status).toBe(200);
    }
    const { rows } = await t.services.db.query<{ CUST_ID: number; NAME: string }>(
      `SELECT "CUST_ID", "NAME" FROM "TB_ANAG_CUST00" WHERE "TENANT_ID" = 'acme' AND "NAME" LIKE 'Firm %'`,
    );
    for (const r of rows) idsByName.set(r.NAME, r.CUST_ID);
    expect(idsByName.size).toBe(RECORDS);
    await eventually(
      async () => {
        const { rows } = await t.services.db.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM "TB_SEARCH"
            WHERE "TENANT_ID" = 'acme' AND "DIMENSION" = 'CUST' AND "RECORD_ID" = ANY($1::text[])`,
          [[...idsByName.values()].map(String)],
        );
        return rows[0]!.n === RECORDS;
      },
      { timeoutMs: 60_000, what: "the records indexed" },
    );
    // Observes (does not replace) the reads of the requests below.
    const db = t.services.db;
    const query = db.query.bind(db);
    db.query = ((text: string, params?: unknown[], opts?: never) => {
      if (capturing) captured.push({ text, params: params ?? [] });
      return query(text, params, opts);
    }) as typeof db.query;
  });
  afterAll(async () => {
    await runtime?.stop();
    await t?.close();
  });

  const expected = (word: string) =>
    [...idsByName]
      .filter(([name]) => name.split(" ").includes(word))
      .map(([, id]) => id)
      .sort((a, b) => a - b);

  /** The plan of the request's search statement, as PostgreSQL would run it now. */
  async function planOf(path: string): Promise<{ body: Record<string, unknown>; plan: string }> {
    captured.length = 0;
    capturing = true;
    const res = await anna.get(path);
    capturing = false;
    expect(res.status).toBe(200);
    const statement = captured.find((s) => s.text.includes('"TB_SEARCH"'));
    expect(statement, "the request's statement reading the search index").toBeDefined();
    const { rows } = await t.services.db.query<{ "QUERY PLAN": string }>(
      `EXPLAIN (COSTS OFF) ${statement!.text}`,
      statement!.params,
    );
    return { body: res.body, plan: rows.map((r) => r["QUERY PLAN"]).join("\n") };
  }

  /**
   * Every read of the search index is a SubPlan the plan uses hashed (run once), and no join loops
   * over the records (the page's one-row join with its count aside).
   */
  const expectHashed = (plan: string) => {
    const lines = plan.split("\n").map((l) => l.trim());
    const searchSubPlans: string[] = [];
    let current: string | null = null;
    for (const line of lines) {
      const header = /^SubPlan (\d+)$/.exec(line);
      if (header) current = header[1]!;
      else if (/ on "TB_SEARCH"/.test(line)) searchSubPlans.push(current ?? "none");
    }
    expect(searchSubPlans.length, plan).toBeGreaterThan(0);
    for (const n of searchSubPlans) expect(plan, plan).toContain(`hashed SubPlan ${n})`);
    expect(plan, plan).not.toMatch(/Nested Loop(?! Left Join\n\s*->\s*Aggregate)/);
  };

  it("a rare word: the index read once into a hash, the right 24 records", async () => {
    const { rows: stats } = await t.services.db.query(
      `SELECT 1 FROM pg_stats WHERE tablename IN ('TB_SEARCH', 'TB_ANAG_CUST00')`,
    );
    expect(stats, "no statistics gathered yet").toEqual([]);
    const { body, plan } = await planOf("/api/v4/core/CUST?source=anag-1&$search=zanzibar&$num_rows=100");
    expectHashed(plan);
    const want = expected("zanzibar");
    expect(want).toHaveLength(RECORDS / 50);
    expect((body.data as Array<{ CUST_ID: number }>).map((r) => r.CUST_ID)).toEqual(want);
    expect(body.meta).toMatchObject({ total: want.length });
  });

  it("a common word: pages and the count are right, planned the same way", async () => {
    const want = expected("common");
    const page = await planOf("/api/v4/core/CUST?source=anag-1&$search=common&$num_rows=50&$offset=100");
    expectHashed(page.plan);
    expect((page.body.data as Array<{ CUST_ID: number }>).map((r) => r.CUST_ID)).toEqual(
      want.slice(100, 150),
    );
    expect(page.body.meta).toMatchObject({ total: want.length });
    const count = await planOf("/api/v4/core/CUST/count?source=anag-1&$search=common");
    expectHashed(count.plan);
    expect(count.body.count).toBe(want.length);
    // Combined with a filter.
    const both = await anna.get(
      `/api/v4/core/CUST?source=anag-1&$search=zanzibar&filter[NAME][$like]=${encodeURIComponent("Firm 1%")}&$num_rows=100`,
    );
    expect((both.body.data as Array<{ CUST_ID: number }>).map((r) => r.CUST_ID)).toEqual(
      [...idsByName]
        .filter(([name]) => name.startsWith("Firm 1") && name.includes("zanzibar"))
        .map(([, id]) => id)
        .sort((a, b) => a - b),
    );
  });

  it("the statistics job analyzes the changed tables, once; the plan stays hashed", async () => {
    const job = startStatisticsJob({ db: t.services.db, logger: t.services.logger, intervalMs: 0 });
    try {
      const analyzed = await job.runOnce();
      expect(analyzed).toEqual(expect.arrayContaining(["TB_SEARCH", "TB_ANAG_CUST00", "TB_ANAG_OUTBOX00"]));
      const { rows } = await t.services.db.query<{ tablename: string }>(
        `SELECT DISTINCT tablename FROM pg_stats WHERE tablename IN ('TB_SEARCH', 'TB_ANAG_CUST00') ORDER BY 1`,
      );
      expect(rows.map((r) => r.tablename)).toEqual(["TB_ANAG_CUST00", "TB_SEARCH"]);
      // CUST has not changed since: the next round leaves it alone. (The event side may still be
      // writing its own tables, the relay's marks, the analytics' and the index's rows, which a
      // round then analyzes: on a slow host it was, 1,200 events behind the records.)
      expect(await job.runOnce()).not.toContain("TB_ANAG_CUST00");
    } finally {
      await job.stop();
    }
    const { body, plan } = await planOf("/api/v4/core/CUST?source=anag-1&$search=zanzibar&$num_rows=100");
    expectHashed(plan);
    expect((body.data as Array<{ CUST_ID: number }>).map((r) => r.CUST_ID)).toEqual(expected("zanzibar"));
  });
});
