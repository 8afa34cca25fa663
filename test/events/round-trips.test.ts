// Round trips of the event side on PostgreSQL (issue 19, W4): statements go out pipelined, so a
// statement whose answer nothing reads travels with the COMMIT behind it. The relay's batch is
// two round trips (BEGIN with the turn and the claim, the mark with COMMIT); the analytics writer's
// and the search indexer's one statement each, no transaction, whatever the batch's size. Their
// prepared statements are planned once per connection (generic plans, chosen for the event side's
// statements and transactions only: the service's reads plan each execution; src/db/connection.ts).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAnalyticsWriter } from "../../src/events/analytics.ts";
import { processEachOnce } from "../../src/events/consumed.ts";
import { createSearchIndexer } from "../../src/events/search.ts";
import type { ReceivedEvent } from "../../src/events/bus.ts";
import { openPostgres } from "../../src/db/database.ts";
import { createRelay, outboxRowToEvent } from "../../src/events/relay.ts";
import { createLogger } from "../../src/logger.ts";
import { bearer, loginAs, UNLIMITED_ENV } from "../helpers/auth.ts";
import { createTestApp, TEST_DATABASE_URL, type TestApp } from "../helpers/env.ts";
import { planCacheMode, preparedPlans } from "../helpers/plans.ts";

if (TEST_DATABASE_URL)
  describe("round trips of the event side (postgres)", () => {
    const sent: Array<{ text: string; pipelined: boolean }> = [];
    let t: TestApp;
    let token: string;
    beforeAll(async () => {
      t = await createTestApp("postgres", {
        fixture: "sample",
        // pg_prepared_statements is per session: not through a PgBouncer.
        databaseDirect: true,
        env: UNLIMITED_ENV,
        onStatement: (text, how) =>
          sent.push({ text: text.replace(/\s+/g, " ").trim(), pipelined: how.pipelined }),
      });
      token = await loginAs(t.app, "anna", "anna-secret-1");
    });
    afterAll(async () => t?.close());

    /** What `run` sent: each statement, "+" when it went out behind another one without waiting. */
    async function trace(run: () => Promise<unknown>): Promise<string[]> {
      sent.length = 0;
      await run();
      return sent.map((s) => `${s.pipelined ? "+" : "-"} ${s.text.slice(0, 30)}`);
    }
    const roundTrips = (lines: string[]) => lines.filter((l) => l.startsWith("-")).length;
    /** The number a `SELECT … AS n` answers. */
    const countOf = async (sql: string) => (await t.services.db.query<{ n: number }>(sql)).rows[0]!.n;

    async function createCities(prefix: string, n: number) {
      const res = await t.app.inject({
        method: "POST",
        url: "/api/v4/core/CITY/batch?source=anag-3",
        headers: bearer(token),
        payload: {
          data: Array.from({ length: n }, (_, i) => ({ CITY_ID: `${prefix}${i}`, NAME: "x", COUNTRY: "IT" })),
        },
      });
      expect(res.json().success).toBe(n);
    }

    /** The outbox rows of the cities created with `prefix`, as the bus hands them out. */
    async function eventsOf(prefix: string): Promise<ReceivedEvent[]> {
      const { rows } = await t.services.db.query<Parameters<typeof outboxRowToEvent>[0]>(
        `SELECT "OUTBOX_ID"::text AS "OUTBOX_ID", "EVENT_TYPE", "AGGREGATE_TYPE", "AGGREGATE_ID",
                "PAYLOAD"::text AS "PAYLOAD", "TENANT_ID", "CREATED_AT"
           FROM "TB_ANAG_OUTBOX00" WHERE "AGGREGATE_TYPE" = 'CITY' AND "AGGREGATE_ID" LIKE $1`,
        [`${prefix}%`],
      );
      return rows.map((r) => ({ ...outboxRowToEvent(r), attempt: 1 }));
    }

    it("a relay's batch: BEGIN with the turn and the claim, the mark with COMMIT: two round trips", async () => {
      await createCities("RT", 7);
      const relay = createRelay({
        db: t.services.db,
        bus: t.services.bus,
        logger: createLogger("silent"),
        batchSize: 1000,
        pollMs: 60_000,
        retentionMs: 0,
      });
      let published = 0;
      const lines = await trace(async () => {
        published = await relay.drain();
      });
      expect(published).toBeGreaterThanOrEqual(7);
      // The batch's transaction, then the drain's last look (a claim that finds nothing).
      const batch = lines.slice(0, lines.indexOf("+ COMMIT") + 1);
      expect(batch.map((l) => l.slice(2))).toEqual([
        "BEGIN",
        "SELECT pg_try_advisory_xact_lo",
        'SELECT o."OUTBOX_ID"::text AS ',
        'UPDATE "TB_ANAG_OUTBOX00" SET ',
        "COMMIT",
      ]);
      expect(roundTrips(batch)).toBe(2);
      expect(
        await countOf(`SELECT count(*)::int AS n FROM "TB_ANAG_OUTBOX00" WHERE "PUBLISHED_AT" IS NULL`),
      ).toBe(0);
    });

    it("an analytics batch: the marks and the counts in one statement; counted once", async () => {
      await createCities("AN", 5);
      const events = await eventsOf("AN");
      expect(events).toHaveLength(5);
      const write = createAnalyticsWriter(t.services.db);
      const counted = () =>
        countOf(`SELECT coalesce(sum("COUNT"), 0)::int AS n FROM "TB_EVENT_STATS"
                  WHERE "TENANT_ID" = 'acme' AND "DIMENSION" = 'CITY' AND "EVENT_TYPE" = 'CITYCreated'`);
      const before = await counted();
      const lines = await trace(() => write(events));
      expect(lines).toEqual([expect.stringMatching(/^- WITH batch AS \( SELECT/)]);
      expect(roundTrips(lines)).toBe(1);
      expect(await counted()).toBe(before + 5);
      // Delivered again: marked already, counted nothing.
      await write(events);
      expect(await counted()).toBe(before + 5);
    });

    it("a search batch: one round trip, the rows indexed", async () => {
      await createCities("SE", 4);
      const events = await eventsOf("SE");
      expect(events).toHaveLength(4);
      const index = createSearchIndexer({ db: t.services.db, metadata: t.services.metadata });
      const lines = await trace(() => index(events));
      expect(lines).toEqual([expect.stringMatching(/^- WITH gone AS \( DELETE/)]);
      expect(roundTrips(lines)).toBe(1);
      expect(
        await countOf(
          `SELECT count(*)::int AS n FROM "TB_SEARCH" WHERE "DIMENSION" = 'CITY' AND "RECORD_ID" LIKE 'SE%'`,
        ),
      ).toBe(4);
    });

    it("the event side's transactions plan their prepared statements once; the service's other statements do not", async () => {
      // One connection: every statement below meets the same session, whose prepared statements
      // PostgreSQL counts (generic_plans, custom_plans).
      const db = t.services.db;
      if (db.kind !== "postgres") throw new Error("PostgreSQL expected");
      const one = openPostgres(db.connectionString, { max: 1 });
      const plansOf = (like: string) => preparedPlans(one, like);
      const mode = planCacheMode;
      try {
        const inMarks: string[] = [];
        for (const id of ["-1", "-2"])
          await processEachOnce(one, "plans-probe", [{ id }], async (tx) => {
            inMarks.push(await mode(tx));
          });
        expect(inMarks).toEqual(["force_generic_plan", "force_generic_plan"]);
        expect(await plansOf('%INSERT INTO "TB_EVENT_CONSUMED"%')).toEqual({ generic: 2, custom: 0 });
        // The analytics writer's and the search indexer's statements, sent on their own.
        const cities = await eventsOf("AN");
        for (let i = 0; i < 2; i++) {
          await createAnalyticsWriter(one)(cities);
          await createSearchIndexer({ db: one, metadata: t.services.metadata })(cities);
        }
        expect(await plansOf('%INSERT INTO "TB_EVENT_STATS"%')).toEqual({ generic: 2, custom: 0 });
        expect(await plansOf('%INSERT INTO "TB_SEARCH"%')).toEqual({ generic: 2, custom: 0 });
        // The relay's batch: its claim and mark too.
        await createCities("PL", 2);
        const relay = createRelay({
          db: one,
          bus: t.services.bus,
          logger: createLogger("silent"),
          batchSize: 1000,
          pollMs: 60_000,
          retentionMs: 0,
        });
        expect(await relay.drain()).toBeGreaterThanOrEqual(2);
        expect((await plansOf('%UPDATE "TB_ANAG_OUTBOX00" SET "PUBLISHED_AT"%')).custom).toBe(0);
        expect((await plansOf('%UPDATE "TB_ANAG_OUTBOX00" SET "PUBLISHED_AT"%')).generic).toBeGreaterThan(0);
        // The same connection then plans a read with its values, every time.
        const read = `SELECT count(*)::int AS n FROM "TB_EVENT_CONSUMED" WHERE "SUBSCRIBER" = $1`;
        for (let i = 0; i < 2; i++) await one.query(read, ["plans-probe"], { prepare: "plans-probe" });
        expect(await plansOf(read)).toEqual({ generic: 0, custom: 2 });
        // And a transaction of the service's (not the event side's) begins with custom plans.
        expect(await one.transaction((tx) => mode(tx))).toBe("force_custom_plan");
      } finally {
        await one.query(`DELETE FROM "TB_EVENT_CONSUMED" WHERE "SUBSCRIBER" = 'plans-probe'`);
        await one.close();
      }
    });
  });
