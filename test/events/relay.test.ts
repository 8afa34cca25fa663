// The outbox relay (issue 10): every write leaves the database as one message, in order per
// record, at least once, through broker faults and relay crashes. On the embedded database with
// the in-process bus always; on PostgreSQL with the real RabbitMQ when both are configured.
import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { BusEvent } from "../../src/events/bus.ts";
import { processEachOnce } from "../../src/events/consumed.ts";
import { createRelay, RELAY_TURN_LOCK, type Relay } from "../../src/events/relay.ts";
import { createLogger } from "../../src/logger.ts";
import type { Database } from "../../src/types.ts";
import { createTestApp, TEST_AMQP_URL, TEST_DATABASE_URL, type TestApp } from "../helpers/env.ts";
import { throughProxy } from "../helpers/proxy.ts";
import { type Client, clientFor, NO_RATE_LIMITS } from "../write/http.ts";
import { brokerConsumer, eventually, explainRelayClaim, tcpProxy } from "./support.ts";

interface Setup {
  name: string;
  backend: "pglite" | "postgres";
  amqp: boolean;
}

const SETUPS: Setup[] = [{ name: "PGlite, in-process bus", backend: "pglite", amqp: false }];
if (TEST_DATABASE_URL && TEST_AMQP_URL)
  SETUPS.push({ name: "PostgreSQL, RabbitMQ", backend: "postgres", amqp: true });

const silent = createLogger("silent");

/** What a test sees of the published messages: from its own broker queue, or from the in-process bus. */
async function collector(t: TestApp, setup: Setup, exchange: string) {
  if (setup.amqp) return brokerConsumer(TEST_AMQP_URL!, exchange);
  const messages: { body: Record<string, unknown>; properties: Record<string, unknown> }[] = [];
  const waiters = new Set<() => void>();
  const stop = await t.services.bus.subscribe(`test-${randomBytes(3).toString("hex")}`, async (e) => {
    messages.push({
      body: JSON.parse(e.body.toString()),
      properties: {
        messageId: e.id,
        type: e.type,
        headers: { tenant_id: e.tenantId, dimension: e.dimension },
      },
    });
    for (const w of waiters) w();
  });
  return {
    messages,
    waitFor(predicate: (m: typeof messages) => boolean, timeoutMs = 30_000) {
      if (predicate(messages)) return Promise.resolve();
      return new Promise<void>((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`timed out with ${messages.length} messages`)),
          timeoutMs,
        );
        const w = () => {
          if (!predicate(messages)) return;
          clearTimeout(timer);
          waiters.delete(w);
          resolve();
        };
        waiters.add(w);
      });
    },
    close: stop,
  };
}

const cityIds = (n: number, prefix: string) => Array.from({ length: n }, (_, i) => `${prefix}${i}`);

async function unpublished(db: Database): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM "TB_ANAG_OUTBOX00" WHERE "PUBLISHED_AT" IS NULL`,
  );
  return rows[0]!.n;
}

describe.each(SETUPS)("outbox relay ($name)", (setup) => {
  let t: TestApp;
  let anna: Client;
  let exchange: string;
  let relays: Relay[] = [];
  let collected: Awaited<ReturnType<typeof collector>>;

  beforeAll(async () => {
    exchange = `dimensio.test.${randomBytes(4).toString("hex")}`;
    t = await createTestApp(setup.backend, {
      fixture: "sample",
      env: {
        ...NO_RATE_LIMITS,
        EVENTS_EXCHANGE: exchange,
        EVENTS_POLL_MS: "60000",
        ...(setup.amqp ? { AMQP_URL: TEST_AMQP_URL! } : {}),
      },
    });
    anna = await clientFor(t.app, "anna");
    collected = await collector(t, setup, exchange);
  });
  afterEach(async () => {
    await Promise.all(relays.map((r) => r.stop()));
    relays = [];
  });
  afterAll(async () => {
    await collected?.close();
    await t?.close();
  });

  const relayOf = (overrides: Partial<Parameters<typeof createRelay>[0]> = {}) =>
    createRelay({
      db: t.services.db,
      bus: t.services.bus,
      logger: silent,
      batchSize: 100,
      pollMs: 60_000,
      retentionMs: 0,
      backoffMs: 50,
      maxBackoffMs: 500,
      ...overrides,
    });
  const startRelay = async (overrides: Partial<Parameters<typeof createRelay>[0]> = {}) => {
    const relay = relayOf(overrides);
    relays.push(relay);
    await relay.start();
    return relay;
  };
  const ofCities = (prefix: string) => (m: { body: Record<string, unknown> }) =>
    m.body.AGGREGATE_TYPE === "CITY" && String(m.body.AGGREGATE_ID).startsWith(prefix);

  it("publishes one message per write, with the body and properties of decisions.md §8, then marks the row", async () => {
    await startRelay();
    const res = await anna.post("/api/v4/core/CITY?source=anag-3", {
      data: { CITY_ID: "EV1", NAME: "Evora", COUNTRY: "PT" },
    });
    expect(res.status).toBe(201);
    const eventId = res.body.event_id as string;
    // Woken by the commit's NOTIFY: the poll is a minute away.
    await collected.waitFor((ms) => ms.some((m) => m.body.OUTBOX_ID === eventId), 10_000);
    const msg = collected.messages.find((m) => m.body.OUTBOX_ID === eventId)!;
    expect(msg.body).toMatchObject({
      OUTBOX_ID: eventId,
      EVENT_TYPE: "CITYCreated",
      AGGREGATE_TYPE: "CITY",
      AGGREGATE_ID: "EV1",
      TENANT_ID: "acme",
      PAYLOAD: { CITY_ID: "EV1", NAME: "Evora", COUNTRY: "PT", TREC: "N" },
    });
    expect(Object.keys(msg.body).sort()).toEqual(
      [
        "AGGREGATE_ID",
        "AGGREGATE_TYPE",
        "CREATED_AT",
        "EVENT_TYPE",
        "OUTBOX_ID",
        "PAYLOAD",
        "TENANT_ID",
      ].sort(),
    );
    expect(new Date(String(msg.body.CREATED_AT)).toISOString()).toBe(msg.body.CREATED_AT);
    expect(msg.properties).toMatchObject({
      messageId: eventId,
      type: "CITYCreated",
      headers: { tenant_id: "acme", dimension: "CITY" },
    });
    if (setup.amqp) {
      expect(msg.properties).toMatchObject({ contentType: "application/json", deliveryMode: 2 });
      expect(Math.abs(msg.properties.timestamp - Date.now() / 1000)).toBeLessThan(120);
    }
    await eventually(
      async () => {
        const { rows } = await t.services.db.query<{ PUBLISHED_AT: Date | null }>(
          `SELECT "PUBLISHED_AT" FROM "TB_ANAG_OUTBOX00" WHERE "OUTBOX_ID" = $1`,
          [eventId],
        );
        return rows[0]?.PUBLISHED_AT ?? undefined;
      },
      { what: "PUBLISHED_AT" },
    );
  });

  it("under a stream of writes the relay gathers them into one claim; the first after a quiet spell goes at once", async () => {
    const batches: string[][] = [];
    const published = new Set<string>();
    let told: (() => void) | null = null;
    // Rows earlier steps left unpublished go first, so that the relay under test starts quiet.
    await relayOf().drain();
    await startRelay({
      gatherMs: 3000,
      onPublished: (events) => {
        batches.push(events.map((e) => e.id));
        for (const e of events) published.add(e.id);
        told?.();
      },
    });
    const until = (ids: string[], ms: number) =>
      new Promise<void>((resolve, reject) => {
        const all = () => ids.every((id) => published.has(id));
        if (all()) return resolve();
        const timer = setTimeout(() => reject(new Error(`not published within ${ms} ms: ${ids}`)), ms);
        told = () => {
          if (!all()) return;
          clearTimeout(timer);
          resolve();
        };
      });
    const write = async (n: number) => {
      const res = await anna.post("/api/v4/core/CITY?source=anag-3", {
        data: { CITY_ID: `GA${n}`, NAME: `Gather ${n}`, COUNTRY: "PT" },
      });
      expect(res.status).toBe(201);
      return res.body.event_id as string;
    };
    // Quiet relay: the first write is claimed at once, well before a gathering pause would end.
    const first = await write(0);
    await until([first], 2500);
    expect(batches.at(-1)).toEqual([first]);
    // Writes one after another while the relay gathers: one claim takes them all.
    const next: string[] = [];
    for (let n = 1; n <= 4; n++) next.push(await write(n));
    await until(next, 10_000);
    expect(batches.at(-1)).toEqual(next);
  });

  it("1,000 writes give 1,000 distinct messages, in OUTBOX_ID order per record", async () => {
    await startRelay();
    const ids = cityIds(20, "K");
    const created = await anna.post("/api/v4/core/CITY/batch?source=anag-3", {
      data: ids.map((id) => ({ CITY_ID: id, NAME: `City ${id}`, COUNTRY: "IT" })),
    });
    expect(created.body).toMatchObject({ success: 20, failed: 0 });
    for (let round = 1; round < 50; round++) {
      const res = await anna.patch("/api/v4/core/CITY/batch?source=anag-3", {
        data: ids.map((id) => ({ id, NAME: `City ${id} v${round}` })),
      });
      expect(res.body.success).toBe(20);
    }
    await collected.waitFor((ms) => ms.filter(ofCities("K")).length >= 1000, 60_000);
    const mine = collected.messages.filter(ofCities("K"));
    expect(mine).toHaveLength(1000);
    expect(new Set(mine.map((m) => m.body.OUTBOX_ID)).size).toBe(1000);
    for (const id of ids) {
      const seq = mine.filter((m) => m.body.AGGREGATE_ID === id).map((m) => BigInt(String(m.body.OUTBOX_ID)));
      expect(seq).toHaveLength(50);
      expect([...seq].sort((a, b) => (a < b ? -1 : 1))).toEqual(seq);
      const last = mine.filter((m) => m.body.AGGREGATE_ID === id).at(-1)!;
      expect((last.body.PAYLOAD as Record<string, unknown>).NAME).toBe(`City ${id} v49`);
    }
    await eventually(async () => (await unpublished(t.services.db)) === 0, { what: "every row marked" });
  });

  it("a relay that dies between publishing and marking: the batch is published again, and a subscriber deduplicates", async () => {
    const created = await anna.post("/api/v4/core/CITY?source=anag-3", {
      data: { CITY_ID: "CR1", NAME: "Crash", COUNTRY: "IT" },
    });
    const eventId = created.body.event_id as string;
    // A database whose connection is lost right at the marking statement.
    const dying: Database = {
      ...t.services.db,
      query: t.services.db.query,
      listen: t.services.db.listen,
      transaction: (fn) =>
        t.services.db.transaction((tx) =>
          fn({
            ...tx,
            query: (text: string, params?: readonly unknown[]) => {
              if (text.startsWith('UPDATE "TB_ANAG_OUTBOX00" SET "PUBLISHED_AT"'))
                throw new Error("connection lost");
              return tx.query(text, params);
            },
          } as typeof tx),
        ),
    };
    const first = createRelay({
      db: dying,
      bus: t.services.bus,
      logger: silent,
      batchSize: 100,
      pollMs: 60_000,
      retentionMs: 0,
    });
    await expect(first.drain()).rejects.toThrow("connection lost");
    await collected.waitFor((ms) => ms.some((m) => m.body.OUTBOX_ID === eventId), 10_000);
    expect(await unpublished(t.services.db)).toBeGreaterThan(0);

    const again = await startRelay();
    await again.drain();
    await collected.waitFor((ms) => ms.filter((m) => m.body.OUTBOX_ID === eventId).length >= 2, 10_000);
    await eventually(async () => (await unpublished(t.services.db)) === 0, { what: "every row marked" });

    // A subscriber that deduplicates on the message id applies it once.
    const effects: string[] = [];
    const apply = (e: Pick<BusEvent, "id">) =>
      processEachOnce(t.services.db, "test-dedupe", [e], async (_tx, fresh) => {
        effects.push(...fresh.map((f) => f.id));
      });
    for (const m of collected.messages.filter((x) => x.body.OUTBOX_ID === eventId)) {
      await apply({ id: String(m.body.OUTBOX_ID) });
    }
    expect(effects).toEqual([eventId]);
  });

  // Defined only where they can run (no skipped tests): a broker to cut, two relays on PostgreSQL.
  if (setup.amqp)
    it("the broker connection cut during 500 writes: all 500 published once it is back", async () => {
      const broker = new URL(TEST_AMQP_URL!);
      const proxy = await tcpProxy(broker.hostname, Number(broker.port || 5672));
      const viaProxy = throughProxy(TEST_AMQP_URL!, proxy);
      const { createAmqpBus } = await import("../../src/events/amqp-bus.ts");
      const bus = createAmqpBus({
        url: viaProxy,
        exchange,
        maxFailures: 5,
        logger: silent,
        publishTimeoutMs: 1000,
      });
      try {
        await startRelay({ bus });
        const ids = cityIds(500, "B");
        const write = (chunk: string[]) =>
          anna.post("/api/v4/core/CITY/batch?source=anag-3", {
            data: chunk.map((id) => ({ CITY_ID: id, NAME: id, COUNTRY: "IT" })),
          });
        expect((await write(ids.slice(0, 100))).body.success).toBe(100);
        proxy.cut();
        for (let i = 100; i < 500; i += 100)
          expect((await write(ids.slice(i, i + 100))).body.success).toBe(100);
        expect(await unpublished(t.services.db)).toBeGreaterThan(0);
        proxy.restore();
        await collected.waitFor(
          (ms) => new Set(ms.filter(ofCities("B")).map((m) => m.body.AGGREGATE_ID)).size >= 500,
          60_000,
        );
        await eventually(async () => (await unpublished(t.services.db)) === 0, { what: "every row marked" });
        const got = new Set(collected.messages.filter(ofCities("B")).map((m) => m.body.AGGREGATE_ID));
        expect(got.size).toBe(500);
      } finally {
        await Promise.all(relays.map((r) => r.stop()));
        relays = [];
        await bus.close();
        await proxy.close();
      }
    }, 90_000);

  it("prunes published rows older than the retention, and the subscribers' marks of messages older than the oldest row kept", async () => {
    const db = t.services.db;
    // Below every id the sequence gives: -30 and -10 published two hours ago, -20 written then
    // and never published (its bus was down, say).
    await db.query(
      `INSERT INTO "TB_ANAG_OUTBOX00"
         ("OUTBOX_ID", "EVENT_TYPE", "AGGREGATE_TYPE", "AGGREGATE_ID", "PAYLOAD", "TENANT_ID", "CREATED_AT", "PUBLISHED_AT")
       VALUES (-30, 'CITYCreated', 'CITY', 'PR1', '{}', 'acme', now() - interval '2 hours', now() - interval '2 hours'),
              (-20, 'CITYCreated', 'CITY', 'PR2', '{}', 'acme', now() - interval '2 hours', NULL),
              (-10, 'CITYCreated', 'CITY', 'PR3', '{}', 'acme', now() - interval '2 hours', now() - interval '2 hours')`,
    );
    await db.query(
      `INSERT INTO "TB_EVENT_CONSUMED" ("SUBSCRIBER", "OUTBOX_ID")
       SELECT s, id FROM unnest(ARRAY['prune-a', 'prune-b']) s, unnest(ARRAY[-30, -20, -10]::bigint[]) id`,
    );
    await startRelay({ retentionMs: 3_600_000 });
    const marksLeft = async () =>
      (
        await db.query<{ SUBSCRIBER: string; OUTBOX_ID: string }>(
          `SELECT "SUBSCRIBER", "OUTBOX_ID"::text AS "OUTBOX_ID" FROM "TB_EVENT_CONSUMED"
            WHERE "SUBSCRIBER" LIKE 'prune-%' ORDER BY 1, 2`,
        )
      ).rows;
    // The mark of -30 goes once the prune has run: its row was older than the oldest kept (-20,
    // published now). -10's row goes too, but not its marks: a message newer than one kept.
    const marks = await eventually(
      async () => {
        const rows = await marksLeft();
        return rows.length === 4 ? rows : undefined;
      },
      { what: "the marks pruned" },
    );
    expect(marks).toEqual([
      { SUBSCRIBER: "prune-a", OUTBOX_ID: "-10" },
      { SUBSCRIBER: "prune-a", OUTBOX_ID: "-20" },
      { SUBSCRIBER: "prune-b", OUTBOX_ID: "-10" },
      { SUBSCRIBER: "prune-b", OUTBOX_ID: "-20" },
    ]);
    const { rows } = await db.query<{ OUTBOX_ID: string; published: boolean }>(
      `SELECT "OUTBOX_ID"::text AS "OUTBOX_ID", "PUBLISHED_AT" IS NOT NULL AS published
         FROM "TB_ANAG_OUTBOX00" WHERE "OUTBOX_ID" < 0 ORDER BY "OUTBOX_ID"`,
    );
    expect(rows).toEqual([{ OUTBOX_ID: "-20", published: true }]);
    await db.query(`DELETE FROM "TB_EVENT_CONSUMED" WHERE "SUBSCRIBER" LIKE 'prune-%'`);
  });

  if (setup.backend === "postgres")
    it("two relays at once: each event is published once", async () => {
      await Promise.all([startRelay({ batchSize: 10 }), startRelay({ batchSize: 10 })]);
      const ids = cityIds(300, "D");
      for (let i = 0; i < 300; i += 50) {
        const res = await anna.post("/api/v4/core/CITY/batch?source=anag-3", {
          data: ids.slice(i, i + 50).map((id) => ({ CITY_ID: id, NAME: id, COUNTRY: "IT" })),
        });
        expect(res.body.success).toBe(50);
      }
      await collected.waitFor((ms) => ms.filter(ofCities("D")).length >= 300, 30_000);
      await eventually(async () => (await unpublished(t.services.db)) === 0, { what: "every row marked" });
      const mine = collected.messages.filter(ofCities("D"));
      expect(mine).toHaveLength(300);
      expect(new Set(mine.map((m) => m.body.OUTBOX_ID)).size).toBe(300);
    });

  if (setup.backend === "postgres")
    it("two relays, one record changed 60 times: its events go out in OUTBOX_ID order, each once", async () => {
      await Promise.all([startRelay({ batchSize: 5 }), startRelay({ batchSize: 5 })]);
      const created = await anna.post("/api/v4/core/CITY?source=anag-3", {
        data: { CITY_ID: "ORD1", NAME: "v0", COUNTRY: "IT" },
      });
      expect(created.status).toBe(201);
      // Changes from four clients at once: the record's row lock orders them.
      await Promise.all(
        [0, 1, 2, 3].map(async (client) => {
          for (let i = 0; i < 15; i++) {
            const res = await anna.patch("/api/v4/core/CITY/ORD1?source=anag-3", {
              data: { NAME: `c${client} v${i}` },
            });
            expect(res.status).toBe(200);
          }
        }),
      );
      await collected.waitFor((ms) => ms.filter(ofCities("ORD1")).length >= 61, 30_000);
      const seq = collected.messages.filter(ofCities("ORD1")).map((m) => BigInt(String(m.body.OUTBOX_ID)));
      expect(seq).toHaveLength(61);
      expect([...seq].sort((a, b) => (a < b ? -1 : 1))).toEqual(seq);
    });

  if (setup.backend === "postgres")
    it("a relay that finds the turn taken publishes nothing; once it is free, the next commit's wake-up publishes", async () => {
      const relay = await startRelay();
      const holder = new pg.Client({
        connectionString: (t.services.db as { connectionString: string }).connectionString,
      });
      await holder.connect();
      try {
        // Another relay's turn: held by a transaction of another connection.
        await holder.query("BEGIN");
        await holder.query("SELECT pg_advisory_xact_lock($1)", [RELAY_TURN_LOCK]);
        const ids = cityIds(5, "TT");
        const res = await anna.post("/api/v4/core/CITY/batch?source=anag-3", {
          data: ids.map((id) => ({ CITY_ID: id, NAME: id, COUNTRY: "IT" })),
        });
        expect(res.body.success).toBe(5);
        expect(await relay.drain()).toBe(0);
        expect(await unpublished(t.services.db)).toBe(5);
        expect(collected.messages.filter(ofCities("TT"))).toHaveLength(0);
        await holder.query("COMMIT");
        // The poll is a minute away: the next write's wake-up publishes what waited too.
        const next = await anna.post("/api/v4/core/CITY?source=anag-3", {
          data: { CITY_ID: "TT5", NAME: "TT5", COUNTRY: "IT" },
        });
        expect(next.status).toBe(201);
        await collected.waitFor((ms) => ms.filter(ofCities("TT")).length >= 6, 10_000);
        await eventually(async () => (await unpublished(t.services.db)) === 0, { what: "every row marked" });
      } finally {
        await holder.end();
      }
    });

  if (setup.backend === "postgres")
    it("the claim walks the unpublished rows' index in order: rows published before cost a later claim nothing, whatever the planner's costs", async () => {
      const db = t.services.db;
      const insert = (from: number, count: number) =>
        db.query(
          `INSERT INTO "TB_ANAG_OUTBOX00" ("OUTBOX_ID", "EVENT_TYPE", "AGGREGATE_TYPE", "AGGREGATE_ID", "PAYLOAD", "TENANT_ID")
           SELECT $1::bigint + g, 'CLAIMCreated', 'CLAIM', g::text, jsonb_build_object('pad', repeat('x', 400)), 'acme'
             FROM generate_series(1, $2::int) AS g`,
          [from, count],
        );
      try {
        // 3,000 rows marked as the relay marks them (dead entries in the partial index until a
        // vacuum), then 10 to claim.
        await insert(-9_000_000, 3000);
        const marked = await db.query<{ xid: string }>(
          `WITH marked AS (
             UPDATE "TB_ANAG_OUTBOX00" SET "PUBLISHED_AT" = now() WHERE "AGGREGATE_TYPE" = 'CLAIM' RETURNING 1
           ) SELECT (pg_current_xact_id()::text::bigint % 4294967296)::text AS xid FROM marked LIMIT 1`,
        );
        // A claim marks the entries it passes over dead only once no transaction of this database
        // can still see them: wait until every snapshot here is newer than the marks.
        await eventually(
          async () => {
            const { rows } = await db.query<{ older: number }>(
              `SELECT count(*)::int AS older FROM pg_stat_activity
                WHERE datname = current_database() AND pid <> pg_backend_pid()
                  AND (backend_xmin::text::bigint <= $1::bigint OR backend_xid::text::bigint <= $1::bigint)`,
              [marked.rows[0]!.xid],
            );
            return rows[0]!.older === 0;
          },
          { what: "no snapshot older than the marks" },
        );
        await insert(-8_000_000, 10);
        await db.query(`ANALYZE "TB_ANAG_OUTBOX00"`);
        // Costs under which the planner, left alone, reads the whole table and sorts it. A claim
        // marks the dead entries it passes over only while no snapshot anywhere that counts for
        // this database still sees them (another test's long statement can hold one a moment
        // longer): claims are explained until one after the marking reads few pages.
        const claim = () => explainRelayClaim(db, { runs: 2, before: "SET LOCAL random_page_cost = 40" });
        let second = await claim();
        const blocks = (plan: typeof second) => plan["Shared Hit Blocks"] + plan["Shared Read Blocks"];
        await eventually(
          async () => {
            if (blocks(second) < 60) return true;
            second = await claim();
            return blocks(second) < 60;
          },
          { what: "a claim after the dead entries were marked", timeoutMs: 20_000 },
        ).catch(() => {});
        const scan = second.Plans?.[0];
        expect(second["Node Type"]).toBe("Limit");
        expect(scan?.["Node Type"]).toBe("Index Scan");
        expect(scan?.["Index Name"]).toBe("TB_ANAG_OUTBOX00_unpublished_idx");
        // Every unpublished row (the ten, and any the app's own writes left for a relay) is claimed.
        expect(second["Actual Rows"]).toBe(Math.min(100, await unpublished(db)));
        // The first claim after the marks passed over the dead entries and marked them; the next
        // reads a few index pages and the claimed rows' pages, not the 3,000 rows published before
        // (about 200 pages: a bitmap scan rechecks them all, a sequential scan reads them all).
        expect(second["Shared Hit Blocks"] + second["Shared Read Blocks"]).toBeLessThan(60);
      } finally {
        await db.query(`DELETE FROM "TB_ANAG_OUTBOX00" WHERE "AGGREGATE_TYPE" = 'CLAIM'`);
      }
    });
});
