// Transactions per request (issue 19): a read is one transaction, a write is one transaction (a
// create of one record one statement, its own transaction: test/write/statements-per-create.test.ts),
// counted by PostgreSQL itself (pg_stat_database: xact_commit + xact_rollback of the test's
// database) over 100 sequential requests of one kind on an otherwise idle process.
//
// A backend reports its counts to pg_stat_database at most once a second while busy, within
// PGSTAT_IDLE_INTERVAL (10 s) once idle, and at once when it exits. So after each kind's requests
// the pool's connections are closed, and the count is read once those backends are gone and it
// has stood still for a second (instead of waiting 11 s for idle backends to report). The
// listening connection runs no transaction during the requests; what it ran at start-up is
// reported before the first baseline, which waits the 11 s once. The counting connection is on
// another database, so that its own transactions are not counted.
// Reads of more than one statement (a total estimated beyond COUNT_EXACT_LIMIT, a reverse relation
// loaded after its page) are one transaction per statement: docs/benchmarks.md.
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, loginAs, UNLIMITED_ENV } from "../helpers/auth.ts";
import { createTestApp, TEST_DATABASE_URL, type TestApp } from "../helpers/env.ts";

const REQUESTS = 100;
/**
 * What a process does per period, not per request, counted in a measurement now and then: the
 * session row read again when its cache entry expired (SESSION_CACHE_MS, 5 s) and its
 * LAST_ACTIVITY mark (at most every 30 s); the pool's connections opened again after the previous
 * measurement closed them (a backend's start commits a transaction of its own); for writes, the
 * NOTIFY owed to commits folded into a window, sent on its own when no commit follows within
 * NOTIFY_OWED_MS to carry it (docs/decisions.md, "Transactions per request"); a connection's plan
 * mode switched when it serves another kind of statement than before (creates keep generic plans,
 * a session's look-up custom ones: a SET outside a transaction, a transaction of its own;
 * src/db/connection.ts), one to three per hundred creates here. Measured idle: reads 101–106,
 * creates 103–108 (PostgreSQL's statement log of an idle run of 100 GraphQL creates shows the
 * creates, one SET and one backend start); under CI's parallel test files, where the same
 * requests take several times as long and so meet more of the periodic upkeep, GraphQL creates
 * counted 111 and 113. A request that cost a second transaction would count 200.
 */
const UPKEEP = 16;

function expectOnePerRequest(counts: Record<string, number>) {
  console.info(`transactions for ${REQUESTS} sequential requests: ${JSON.stringify(counts)}`);
  for (const [kind, n] of Object.entries(counts)) {
    expect(n, `${kind}: ${n} transactions for ${REQUESTS} requests`).toBeGreaterThanOrEqual(REQUESTS);
    expect(n, `${kind}: ${n} transactions for ${REQUESTS} requests`).toBeLessThanOrEqual(REQUESTS + UPKEEP);
  }
}
/** PostgreSQL's PGSTAT_IDLE_INTERVAL (10 s) and a second of margin. */
const SETTLED_MS = 11_000;
/**
 * How long the count stands still, once the pool's backends are gone, before it is read: an exiting
 * backend leaves pg_stat_activity just before it reports its counts.
 */
const STILL_MS = 1000;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

if (TEST_DATABASE_URL) {
  describe("transactions per request (postgres)", () => {
    let t: TestApp;
    let token: string;
    let monitor: pg.Client;
    let database: string;

    beforeAll(async () => {
      t = await createTestApp("postgres", {
        fixture: "sample",
        // Named statements and their plans: a session of its own, not through a PgBouncer.
        databaseDirect: true,
        // The session is read again once a minute rather than every 5 s: on a slow machine the
        // requests of one kind take long enough for the 5 s re-reads to exceed the upkeep.
        // Totals are counted every time (a kept total would make a count no transaction at all:
        // test/read/totals-cache.test.ts), so what is measured is a read that reaches the database.
        env: { ...UNLIMITED_ENV, SESSION_CACHE_MS: "60000", COUNT_CACHE_MS: "0" },
      });
      if (t.services.db.kind !== "postgres") throw new Error("PostgreSQL expected");
      database = new URL(t.services.db.connectionString).pathname.slice(1);
      // Autovacuum's workers count in the database's transactions too: not on these tables.
      await t.services.db.query(
        `DO $$ DECLARE r record; BEGIN
           FOR r IN SELECT tablename FROM pg_tables WHERE schemaname = 'public' LOOP
             EXECUTE format('ALTER TABLE %I SET (autovacuum_enabled = false)', r.tablename);
           END LOOP; END $$`,
      );
      monitor = new pg.Client({ connectionString: TEST_DATABASE_URL! });
      await monitor.connect();
      token = await loginAs(t.app, "anna", "anna-secret-1");
    }, 60_000);
    afterAll(async () => {
      await monitor?.end();
      await t?.close();
    });

    async function transactions(): Promise<number> {
      const { rows } = await monitor.query<{ n: string }>(
        `SELECT (xact_commit + xact_rollback)::text AS n FROM pg_stat_database WHERE datname = $1`,
        [database],
      );
      return Number(rows[0]!.n);
    }

    /** The count once it has not moved for `stillMs`. */
    async function standing(stillMs: number): Promise<number> {
      const deadline = Date.now() + 90_000;
      let last = await transactions();
      let since = Date.now();
      while (Date.now() - since < stillMs) {
        if (Date.now() > deadline) throw new Error("pg_stat_database kept moving on an idle process");
        await sleep(100);
        const now = await transactions();
        if (now !== last) {
          last = now;
          since = Date.now();
        }
      }
      return last;
    }

    /** Client backends of the test database other than the process's listening connection. */
    async function poolBackends(): Promise<number> {
      const { rows } = await monitor.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE datname = $1 AND backend_type = 'client backend' AND application_name <> 'dimensio listening'`,
        [database],
      );
      return rows[0]!.n;
    }

    /**
     * The count once every backend that served the requests has reported it: the pool's idle
     * connections are closed (a connection held a moment, by a periodic statement, once it is idle
     * again) until none of the pool's backends is left, and the count has then stood still for
     * STILL_MS.
     */
    async function settled(): Promise<number> {
      if (t.services.db.kind !== "postgres") throw new Error("PostgreSQL expected");
      const { pool } = t.services.db;
      const deadline = Date.now() + 60_000;
      for (;;) {
        const idle = await Promise.all(Array.from({ length: pool.idleCount }, () => pool.connect()));
        for (const client of idle) client.release(true);
        if ((await poolBackends()) === 0) break;
        if (Date.now() > deadline) throw new Error("the pool's backends did not go");
        await sleep(50);
      }
      return standing(STILL_MS);
    }

    type Request = { method: "GET" | "POST"; url: string; payload?: Record<string, unknown> };
    /** The settled count after the previous measurement (the next one's baseline). */
    let baseline: number | null = null;

    /** Transactions of REQUESTS sequential requests (after one that warms caches and plans). */
    async function perRequests(make: (i: number) => Request, status: number): Promise<number> {
      const send = async (r: Request) => {
        const res = await t.app.inject({
          method: r.method,
          url: r.url,
          headers: bearer(token),
          ...(r.payload ? { payload: r.payload } : {}),
        });
        expect(res.statusCode, res.body.slice(0, 300)).toBe(status);
        if (r.url.includes("graphql")) expect(res.json().errors, res.body.slice(0, 300)).toBeUndefined();
      };
      // The warm-up's own transactions are in the baseline: taken before the previous settled
      // count only when none was taken yet, once every backend of the start-up has reported (the
      // listening connection's LISTENs too, which it does not exit to report).
      if (baseline === null) {
        await send(make(-1));
        await settled();
        baseline = await standing(SETTLED_MS);
      }
      const before = baseline;
      for (let i = 0; i < REQUESTS; i++) await send(make(i));
      baseline = await settled();
      return baseline - before;
    }

    const graphql = (query: string): Request => ({ method: "POST", url: "/graphql", payload: { query } });

    it(
      "reads: one transaction each (list with its total, by id, count, GraphQL list with a forward relation and its total)",
      async () => {
        const kinds: Array<[string, (i: number) => Request]> = [
          [
            "list + total",
            () => ({ method: "GET", url: "/api/v4/core/CUST?source=anag-1&sort=NAME&$num_rows=2" }),
          ],
          ["by id", () => ({ method: "GET", url: "/api/v4/core/CUST/1?source=anag-1" })],
          [
            "count",
            () => ({ method: "GET", url: "/api/v4/core/CUST/count?source=anag-1&filter[CITY_ID]=MI" }),
          ],
          [
            "GraphQL list",
            () =>
              graphql(
                `{ CUST(source: "anag-1", limit: 5) { data { CUST_ID NAME CITY { NAME } } meta { total } } }`,
              ),
          ],
        ];
        const counts: Record<string, number> = {};
        for (const [name, make] of kinds) counts[name] = await perRequests(make, 200);
        expectOnePerRequest(counts);
      },
      10 * 60_000,
    );

    it(
      "writes: one transaction each, one statement sent without BEGIN/COMMIT, the NOTIFY that wakes other processes' relays inside it (REST create, GraphQL create)",
      async () => {
        const counts = {
          "REST create": await perRequests(
            (i) => ({
              method: "POST",
              url: "/api/v4/core/CUST?source=anag-1",
              payload: { data: { NAME: `Tx ${i}` } },
            }),
            201,
          ),
          "GraphQL create": await perRequests(
            (i) =>
              graphql(
                `mutation { CUST_create(source: "anag-1", data: {NAME: "Tx g${i}"}) { data { CUST_ID } } }`,
              ),
            200,
          ),
        };
        expectOnePerRequest(counts);
      },
      10 * 60_000,
    );
  });
}
