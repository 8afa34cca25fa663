// Batched subscribers (issue 11): the events a queue hands out at once are processed together,
// in one transaction of a few statements, and still acknowledged one by one: a batch that fails
// is retried event by event, so only the failing event is requeued and dead-lettered.
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAnalyticsWriter } from "../../src/events/analytics.ts";
import { inBatches } from "../../src/events/batching.ts";
import { type BusEvent, createMemoryBus, type ReceivedEvent } from "../../src/events/bus.ts";
import { createSearchIndexer } from "../../src/events/search.ts";
import { createNotificationSender, logTransport, type Notification } from "../../src/events/notifications.ts";
import { createWebhookDispatcher } from "../../src/events/webhooks/dispatcher.ts";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";
import { eventually } from "./support.ts";

let nextId = 900_000;
function event(
  dimension: string,
  recordId: string,
  type: string,
  payload: Record<string, unknown>,
  tenant = "acme",
): ReceivedEvent {
  const id = String(++nextId);
  const createdAt = "2026-11-23T10:00:00.000Z";
  const body = {
    OUTBOX_ID: id,
    EVENT_TYPE: type,
    AGGREGATE_TYPE: dimension,
    AGGREGATE_ID: recordId,
    PAYLOAD: payload,
    CREATED_AT: createdAt,
    TENANT_ID: tenant,
  };
  return {
    id,
    type,
    tenantId: tenant,
    dimension,
    timestamp: new Date(createdAt),
    body: Buffer.from(JSON.stringify(body)),
    attempt: 1,
  };
}

describe("inBatches on the in-process bus", () => {
  const published = (n: number): BusEvent[] =>
    Array.from({ length: n }, (_, i) => event("CUST", String(i), "CUSTCreated", {}));

  it("hands the events queued at once to one call, each acknowledged", async () => {
    const bus = createMemoryBus({ maxFailures: 3 });
    const calls: string[][] = [];
    await bus.subscribe(
      "batched",
      inBatches(async (events) => void calls.push(events.map((e) => e.id)), { maxBatch: 40 }),
      { concurrency: 40 },
    );
    const events = published(100);
    await bus.publish(events);
    await eventually(() => calls.flat().length === 100, { what: "100 events handled" });
    // 100 events in batches of at most 40: three calls, every event once, in order.
    expect(calls.map((c) => c.length)).toEqual([40, 40, 20]);
    expect(calls.flat()).toEqual(events.map((e) => e.id));
    await bus.close();
  });

  it("a failing batch is retried event by event: only the bad event is dead-lettered", async () => {
    const dead: string[] = [];
    const bus = createMemoryBus({ maxFailures: 2, onDeadLetter: (_q, e) => dead.push(e.id) });
    const done: string[] = [];
    const sizes: number[] = [];
    const events = published(10);
    const poison = events[6]!.id;
    await bus.subscribe(
      "batched",
      inBatches(
        async (batch) => {
          sizes.push(batch.length);
          if (batch.some((e) => e.id === poison)) throw new Error("cannot process");
          done.push(...batch.map((e) => e.id));
        },
        { maxBatch: 100 },
      ),
      { concurrency: 100 },
    );
    await bus.publish(events);
    await eventually(() => dead.length === 1, { what: "the poison event dead-lettered" });
    expect(dead).toEqual([poison]);
    expect(done.sort()).toEqual(
      events
        .map((e) => e.id)
        .filter((id) => id !== poison)
        .sort(),
    );
    // The batch of 10 failed, then each event alone (10 calls), then the poison's second attempt.
    expect(sizes).toEqual([10, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]);
    await bus.close();
  });
});

describe.each(BACKENDS)("batched subscribers (%s)", (backend) => {
  let t: TestApp;
  const statements: string[] = [];
  beforeAll(async () => {
    t = await createTestApp(backend, {
      fixture: "sample",
      onStatement: (text) => statements.push(text.replace(/\s+/g, " ").trim()),
    });
  });
  afterAll(async () => t?.close());

  it("analytics: a batch is one transaction; a message seen before is not counted again", async () => {
    const write = createAnalyticsWriter(t.services.db);
    const created = [1, 2, 3].map((i) => event("ITEM", String(i), "ITEMCreated", {}));
    const updated = event("ITEM", "1", "ITEMUpdated", {});
    const other = event("ITEM", "9", "ITEMCreated", {}, "globex");
    statements.length = 0;
    await write([...created, updated, other]);
    // The marks and the counts in one statement: no transaction around it.
    expect(statements).toHaveLength(1);
    // Delivered again (a crash before the ack): nothing counted twice, only the new one counted.
    // Twice in one batch too: counted once.
    const later = event("ITEM", "4", "ITEMCreated", {});
    await write([created[0]!, updated, later, later]);
    const { rows } = await t.services.db.query<{ TENANT_ID: string; EVENT_TYPE: string; COUNT: number }>(
      `SELECT "TENANT_ID", "EVENT_TYPE", "COUNT"::int AS "COUNT" FROM "TB_EVENT_STATS"
        WHERE "DIMENSION" = 'ITEM' AND "DAY" = '2026-11-23' ORDER BY 1, 2`,
    );
    expect(rows).toEqual([
      { TENANT_ID: "acme", EVENT_TYPE: "ITEMCreated", COUNT: 4 },
      { TENANT_ID: "acme", EVENT_TYPE: "ITEMUpdated", COUNT: 1 },
      { TENANT_ID: "globex", EVENT_TYPE: "ITEMCreated", COUNT: 1 },
    ]);
  });

  it("search: per record the batch's latest event wins; a force delete removes the row", async () => {
    const index = createSearchIndexer({ db: t.services.db, metadata: t.services.metadata });
    const first = event("CUST", "77001", "CUSTCreated", { NAME: "Batch Original" });
    const second = event("CUST", "77001", "CUSTUpdated", { NAME: "Batch Renamed" });
    const gone = event("CUST", "77002", "CUSTCreated", { NAME: "Batch Doomed" });
    // Out of order in the batch: the later event is still the one indexed.
    statements.length = 0;
    await index([second, first, gone]);
    // The deletes and the upserts in one statement: no transaction around it.
    expect(statements).toHaveLength(1);
    const text = async () =>
      (
        await t.services.db.query<{ RECORD_ID: string; TEXT: string }>(
          `SELECT "RECORD_ID", "TEXT" FROM "TB_SEARCH" WHERE "RECORD_ID" IN ('77001', '77002') ORDER BY 1`,
        )
      ).rows;
    expect(await text()).toEqual([
      { RECORD_ID: "77001", TEXT: expect.stringContaining("Batch Renamed") },
      { RECORD_ID: "77002", TEXT: expect.stringContaining("Batch Doomed") },
    ]);
    // An older message afterwards changes nothing; a force delete removes the record's row (one
    // statement for the delete and the upsert of a batch).
    statements.length = 0;
    await index([first, event("CUST", "77002", "CUSTDeleted", { force: true })]);
    expect(statements).toHaveLength(1);
    expect(await text()).toEqual([{ RECORD_ID: "77001", TEXT: expect.stringContaining("Batch Renamed") }]);
  });

  it("notifications: one per new event, in order; a failed send leaves the batch unmarked", async () => {
    const sent: Notification[] = [];
    let failOn: string | null = null;
    const send = createNotificationSender(t.services.db, {
      async send(n) {
        if (n.eventId === failOn) throw new Error("transport down");
        sent.push(n);
      },
    });
    const a = event("CUST", "1", "CUSTCreated", {});
    const b = event("CUST", "2", "CUSTCreated", {});
    failOn = b.id;
    await expect(send([a, b])).rejects.toThrow("transport down");
    failOn = null;
    sent.length = 0;
    await send([a, b]);
    await send([a, b]);
    expect(sent.map((n) => n.eventId)).toEqual([a.id, b.id]);
  });

  it("notifications through the log: a line per event at info; under a higher level no statement, no mark", async () => {
    const lines: string[] = [];
    const sink = { write: (line: string) => void lines.push(line) };
    const marks = async (ids: string[]) =>
      (
        await t.services.db.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM "TB_EVENT_CONSUMED"
            WHERE "SUBSCRIBER" = 'notifications' AND "OUTBOX_ID" = ANY($1::bigint[])`,
          [ids],
        )
      ).rows[0]!.n;
    const quiet = [event("CUST", "5", "CUSTCreated", {}), event("CUST", "6", "CUSTUpdated", {})];
    statements.length = 0;
    await createNotificationSender(t.services.db, logTransport(pino({ level: "warn" }, sink)))(quiet);
    expect(statements).toEqual([]);
    expect(lines).toEqual([]);
    expect(await marks(quiet.map((e) => e.id))).toBe(0);

    const heard = [event("CUST", "7", "CUSTCreated", {})];
    await createNotificationSender(t.services.db, logTransport(pino({ level: "info" }, sink)))(heard);
    expect(lines.map((l) => JSON.parse(l).msg)).toEqual(["CUSTCreated CUST 7"]);
    expect(await marks(heard.map((e) => e.id))).toBe(1);
  });

  it("webhooks: the batch's tenants' registrations read once, one delivery per match", async () => {
    await t.services.db.query(
      `INSERT INTO "TB_WEBHOOK" ("SOURCE", "URL", "SECRET", "EVENTS", "DIMENSIONS")
       VALUES ('acme', 'https://example.com/a', 'secret', '["CUSTCreated"]', NULL),
              ('globex', 'https://example.com/b', 'secret', '["*"]', '["CUST"]')`,
    );
    let queued = 0;
    const dispatch = createWebhookDispatcher({
      db: t.services.db,
      metadata: t.services.metadata,
      onQueued: () => queued++,
    });
    const events = [
      event("CUST", "1", "CUSTCreated", { NAME: "A" }),
      event("CUST", "1", "CUSTUpdated", { NAME: "A2" }),
      event("CUST", "2", "CUSTCreated", { NAME: "G" }, "globex"),
      event("ORD", "3", "ORDCreated", {}, "globex"),
    ];
    statements.length = 0;
    await dispatch(events);
    expect(statements).toHaveLength(2); // the registrations, the deliveries
    expect(queued).toBe(1);
    const { rows } = await t.services.db.query<{ OUTBOX_ID: string; URL: string }>(
      `SELECT d."OUTBOX_ID"::text AS "OUTBOX_ID", w."URL" FROM "TB_WEBHOOK_DELIVERY" d
         JOIN "TB_WEBHOOK" w ON w."WEBHOOK_ID" = d."WEBHOOK_ID" ORDER BY d."OUTBOX_ID"`,
    );
    expect(rows).toEqual([
      { OUTBOX_ID: events[0]!.id, URL: "https://example.com/a" },
      { OUTBOX_ID: events[2]!.id, URL: "https://example.com/b" },
    ]);
  });
});
