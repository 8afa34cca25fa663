// The in-process bus is bounded: a subscriber slower than the writes makes the relay wait, and the
// events wait in the outbox (on disk) rather than in the process's memory. Without the bound, a
// slow subscriber (a search rebuild, a stuck database) let its queue grow with every write.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type BusEvent, createMemoryBus, type ReceivedEvent } from "../../src/events/bus.ts";
import { createRelay } from "../../src/events/relay.ts";
import { createLogger } from "../../src/logger.ts";
import { createTestApp, type TestApp } from "../helpers/env.ts";
import { clientFor, NO_RATE_LIMITS } from "../write/http.ts";
import { eventually } from "./support.ts";

const silent = createLogger("silent");

/** A gate a handler waits at until the test opens it. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { opened, open };
}

const event = (id: number): BusEvent => ({
  id: String(id),
  type: "CITYCreated",
  tenantId: "acme",
  dimension: "CITY",
  timestamp: new Date(),
  body: Buffer.from("{}"),
});

describe("the in-process bus's bound (whenRoom)", () => {
  it("holds the publisher while an attached queue is full, lets it go once drained; a detached queue does not count", async () => {
    const bus = createMemoryBus({ maxFailures: 3, maxQueued: 3 });
    const held = gate();
    const seen: string[] = [];
    const stop = await bus.subscribe("slow", async (e) => {
      await held.opened;
      seen.push(e.id);
    });
    await bus.publish([1, 2, 3, 4].map(event));
    // One is being processed, three wait: the bound is reached.
    expect(bus.queued("slow")).toBe(3);
    let roomy = false;
    const room = bus.whenRoom!().then(() => {
      roomy = true;
    });
    await Promise.resolve();
    expect(roomy).toBe(false);
    held.open();
    await room;
    expect(bus.queued("slow")).toBeLessThan(3);
    await eventually(() => seen.length === 4, { what: "the four messages" });
    expect(seen).toEqual(["1", "2", "3", "4"]);

    // A durable queue nobody drains any more keeps its messages but no longer holds anyone back.
    await stop();
    await bus.publish([5, 6, 7, 8].map(event));
    expect(bus.queued("slow")).toBe(4);
    await bus.whenRoom!();
    await bus.close();
  });
});

describe("the relay on the in-process bus (PGlite)", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp("pglite", {
      fixture: "sample",
      env: { ...NO_RATE_LIMITS, EVENTS_POLL_MS: "60000" },
    });
  });
  afterAll(async () => {
    await t?.close();
  });

  it("publishes only while the subscribers' queues have room: a slow subscriber leaves the events in the outbox, and gets every one, in order, once it catches up", async () => {
    const MAX_QUEUED = 10;
    const BATCH = 5;
    const bus = createMemoryBus({ maxFailures: 3, maxQueued: MAX_QUEUED });
    const held = gate();
    const processed: string[] = [];
    await bus.subscribeBatches(
      "slow",
      async (events: readonly ReceivedEvent[]) => {
        await held.opened;
        for (const e of events) processed.push(e.id);
      },
      { maxBatch: BATCH },
    );
    // What the queue held after each publish, and whether a publisher is waiting for room.
    let mostQueued = 0;
    const publish = bus.publish.bind(bus);
    bus.publish = async (events) => {
      await publish(events);
      mostQueued = Math.max(mostQueued, bus.queued("slow"));
    };
    let waitingForRoom = false;
    const whenRoom = bus.whenRoom!.bind(bus);
    bus.whenRoom = () => {
      let resolved = false;
      const room = whenRoom().then(() => {
        resolved = true;
        waitingForRoom = false;
      });
      void Promise.resolve().then(() => {
        if (!resolved) waitingForRoom = true;
      });
      return room;
    };

    const anna = await clientFor(t.app, "anna");
    const ids = Array.from({ length: 60 }, (_, i) => `BP${String(i).padStart(2, "0")}`);
    const res = await anna.post("/api/v4/core/CITY/batch?source=anag-3", {
      data: ids.map((id) => ({ CITY_ID: id, NAME: `City ${id}`, COUNTRY: "IT" })),
    });
    expect(res.status).toBe(200);
    expect(res.body.success).toBe(60);
    const { rows: mine } = await t.services.db.query<{ OUTBOX_ID: string }>(
      `SELECT "OUTBOX_ID"::text AS "OUTBOX_ID" FROM "TB_ANAG_OUTBOX00"
        WHERE "AGGREGATE_TYPE" = 'CITY' AND "AGGREGATE_ID" = ANY($1) ORDER BY "OUTBOX_ID"`,
      [ids],
    );
    expect(mine).toHaveLength(60);
    const unpublished = async () => {
      const { rows } = await t.services.db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM "TB_ANAG_OUTBOX00"
          WHERE "PUBLISHED_AT" IS NULL AND "OUTBOX_ID" = ANY($1::bigint[])`,
        [mine.map((r) => r.OUTBOX_ID)],
      );
      return rows[0]!.n;
    };

    const relay = createRelay({
      db: t.services.db,
      bus,
      logger: silent,
      batchSize: BATCH,
      pollMs: 60_000,
      retentionMs: 0,
    });
    await relay.start();
    try {
      // The subscriber is stuck: its queue fills to the bound, the relay waits, and the rest stays
      // in the outbox.
      await eventually(() => waitingForRoom, { what: "the relay waiting for room" });
      expect(bus.queued("slow")).toBeGreaterThanOrEqual(MAX_QUEUED);
      expect(await unpublished()).toBeGreaterThanOrEqual(60 - BATCH - (MAX_QUEUED + BATCH - 1));
      held.open();
      await eventually(() => processed.length >= 60, { what: "every event processed" });
      await eventually(async () => (await unpublished()) === 0, { what: "every row marked" });
    } finally {
      await relay.stop();
      await bus.close();
    }
    const outboxIds = mine.map((r) => r.OUTBOX_ID);
    expect(processed.filter((id) => outboxIds.includes(id))).toEqual(outboxIds);
    // At most one batch past the bound: the relay asks for room before each claim.
    expect(mostQueued).toBeLessThanOrEqual(MAX_QUEUED + BATCH - 1);
  });
});
