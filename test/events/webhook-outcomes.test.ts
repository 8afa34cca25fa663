// How the webhook delivery worker claims and records its attempts (src/events/webhooks/delivery.ts):
// deliveries are claimed ahead, so a slot whose attempt ends sends the next one without waiting
// for the statement that claims more (only for the re-read of its registration); an attempt's outcome is written by the statement that claims the next
// deliveries, attempts that finish together share one statement, and an outcome the database did
// not take (its connection cut) is kept and written once the database answers again, not sent to
// the receiver a second time when its lease runs out; what was claimed ahead and not sent when the
// worker stops is handed back. PostgreSQL reached through a TCP proxy the test cuts or silences;
// real HTTP receivers on loopback.
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDeliveryWorker, type DeliveryWorker } from "../../src/events/webhooks/delivery.ts";
import type { Database } from "../../src/types.ts";
import { createTestApp, TEST_DATABASE_URL, type TestApp } from "../helpers/env.ts";
import { faultyProxy } from "../helpers/proxy.ts";
import { eventually, webhookReceiver } from "./support.ts";

const TENANT = "outcomes";

/** A worker on `db` whose warnings and errors are kept in `problems`. */
function worker(db: Database, problems: string[], perReceiver = 4): DeliveryWorker {
  const logger = pino({ level: "warn" }, { write: (line: string) => void problems.push(line) });
  return createDeliveryWorker({
    db,
    logger,
    retryBaseMs: 1000,
    allowPrivate: true,
    concurrency: 32,
    concurrencyPerReceiver: perReceiver,
    concurrencyPerTenant: 32,
    // Long: every claim in these tests follows a wake-up or a retry, never the poll.
    pollMs: 60_000,
  });
}

/** A registration to `url` and `count` deliveries due now; their ids. */
async function queueDeliveries(db: Database, url: string, count: number): Promise<{ webhookId: number }> {
  const { rows } = await db.query<{ WEBHOOK_ID: number }>(
    `INSERT INTO "TB_WEBHOOK" ("SOURCE", "URL", "EVENTS", "TIMEOUT_MS")
     VALUES ($1, $2, '["*"]', 2000) RETURNING "WEBHOOK_ID"`,
    [TENANT, url],
  );
  const webhookId = rows[0]!.WEBHOOK_ID;
  await db.query(
    `INSERT INTO "TB_WEBHOOK_DELIVERY" ("WEBHOOK_ID", "OUTBOX_ID", "EVENT_TYPE", "BODY")
     SELECT $1, 900000 + g, 'CITYCreated',
            json_build_object('event_id', (900000 + g)::text, 'timestamp', '2026-11-26T00:00:00.000Z')::text
       FROM generate_series(1, $2::int) g`,
    [webhookId, count],
  );
  return { webhookId };
}

/** The registration's deliveries by status and attempts, and its log rows with the transaction that wrote each. */
async function recorded(db: Database, webhookId: number) {
  const deliveries = await db.query<{ status: string; attempts: number; n: number }>(
    `SELECT "STATUS" AS status, "ATTEMPTS" AS attempts, count(*)::int AS n FROM "TB_WEBHOOK_DELIVERY"
      WHERE "WEBHOOK_ID" = $1 GROUP BY 1, 2 ORDER BY 1, 2`,
    [webhookId],
  );
  const log = await db.query<{ status: string; attempt: number; xmin: string }>(
    `SELECT "STATUS" AS status, "ATTEMPT_COUNT" AS attempt, xmin::text AS xmin
       FROM "TB_WEBHOOK_LOG" WHERE "WEBHOOK_ID" = $1 ORDER BY "OUTBOX_ID"`,
    [webhookId],
  );
  return { deliveries: deliveries.rows, log: log.rows };
}

/**
 * A receiver on loopback whose requests wait for the test: `answer(n)` answers the n-th (from 0),
 * `answerAll()` every one, those to come included.
 */
async function heldReceiver(status = 200) {
  const gates = new Map<number, () => void>();
  const opened = new Set<number>();
  let all = false;
  const receiver = await webhookReceiver(
    (n) =>
      new Promise<number>((resolve) => {
        if (all || opened.has(n)) resolve(status);
        else gates.set(n, () => resolve(status));
      }),
  );
  return {
    receiver,
    answer(n: number) {
      opened.add(n);
      gates.get(n)?.();
    },
    answerAll() {
      all = true;
      for (const open of gates.values()) open();
    },
  };
}

/** Waits until the registration's log has `rows` rows. */
const logRows = (db: Database, webhookId: number, rows: number, timeoutMs?: number) =>
  eventually(async () => (await recorded(db, webhookId)).log.length === rows, {
    what: `${rows} log rows`,
    ...(timeoutMs ? { timeoutMs } : {}),
  });

/** Waits until `n` of the registration's deliveries are claimed and unfinished (one attempt, pending). */
const claimed = (db: Database, webhookId: number, n: number) =>
  eventually(
    async () =>
      (await recorded(db, webhookId)).deliveries.some(
        (d) => d.status === "pending" && d.attempts === 1 && d.n === n,
      ),
    { what: `${n} claimed` },
  );

if (TEST_DATABASE_URL)
  describe("webhook attempts claimed ahead and recorded with the next claim (postgres)", () => {
    let proxy: Awaited<ReturnType<typeof faultyProxy>>;
    let t: TestApp;

    beforeAll(async () => {
      const server = new URL(TEST_DATABASE_URL!);
      proxy = await faultyProxy(server.hostname, Number(server.port || 5432));
      t = await createTestApp("postgres", { fixture: "sample", databaseThrough: proxy.port });
    });
    afterAll(async () => {
      proxy?.restore();
      await t?.close();
      await proxy?.close();
    });

    /**
     * `deliveries` due to a held receiver and a worker sending `perReceiver` at once, started;
     * `run` gets them, and the worker, the receiver and the proxy are back to normal after it.
     */
    async function scenario(
      deliveries: number,
      perReceiver: number,
      run: (s: {
        db: Database;
        webhookId: number;
        worker: DeliveryWorker;
        problems: string[];
        held: Awaited<ReturnType<typeof heldReceiver>>;
      }) => Promise<void>,
    ): Promise<void> {
      const held = await heldReceiver();
      const { db } = t.services;
      const { webhookId } = await queueDeliveries(db, held.receiver.url, deliveries);
      const problems: string[] = [];
      const w = worker(db, problems, perReceiver);
      w.start();
      try {
        await run({ db, webhookId, worker: w, problems, held });
      } finally {
        proxy.restore();
        held.answerAll();
        await w.stop();
        await held.receiver.close();
      }
    }

    it("attempts that finish together are written by fewer statements than attempts, each with its log row", () =>
      scenario(4, 4, async ({ db, webhookId, problems, held }) => {
        // The four requests are in; the receiver answers them at once.
        await held.receiver.waitFor(4);
        held.answerAll();
        await logRows(db, webhookId, 4);
        const { deliveries, log } = await recorded(db, webhookId);
        expect(deliveries).toEqual([{ status: "success", attempts: 1, n: 4 }]);
        expect(log.map((r) => [r.status, r.attempt])).toEqual(Array(4).fill(["success", 1]));
        // One statement per attempt would be four transactions.
        expect(new Set(log.map((r) => r.xmin)).size).toBeLessThan(4);
        expect(held.receiver.requests).toHaveLength(4);
        expect(problems).toEqual([]);
      }));

    it("an outcome the database did not take is written once it answers again, and the receiver is not called twice", () =>
      scenario(1, 4, async ({ db, webhookId, problems, held }) => {
        await held.receiver.waitFor(1);
        // The database goes away while the receiver has the request; then the receiver answers.
        proxy.cut();
        held.answer(0);
        await eventually(async () => problems.length > 0, { what: "the failed write noticed" });
        proxy.restore();
        await logRows(db, webhookId, 1, 10_000);
        const { deliveries, log } = await recorded(db, webhookId);
        expect(deliveries).toEqual([{ status: "success", attempts: 1, n: 1 }]);
        expect(log.map((r) => [r.status, r.attempt])).toEqual([["success", 1]]);
        expect(held.receiver.requests).toHaveLength(1);
        expect(problems.join("")).toContain("recording or claiming deliveries failed");
      }));

    it("outcomes that finish while the worker stops are written before stop() returns", () =>
      scenario(2, 4, async ({ db, webhookId, worker: w, held }) => {
        await held.receiver.waitFor(2);
        const stopped = w.stop();
        held.answerAll();
        await stopped;
        const { deliveries, log } = await recorded(db, webhookId);
        expect(deliveries).toEqual([{ status: "success", attempts: 1, n: 2 }]);
        expect(log).toHaveLength(2);
      }));

    it("a slot whose attempt ends sends its registration's next delivery once its registration is re-read (the database silent: when it answers)", () =>
      // Two at once to this receiver; four held: two sent, two claimed ahead.
      scenario(6, 2, async ({ db, webhookId, held }) => {
        await held.receiver.waitFor(2);
        await claimed(db, webhookId, 4);
        expect(held.receiver.requests).toHaveLength(2);
        // The database goes silent; the first attempt ends: the next delivery waits for its
        // registration to be read again (it may have been deleted, deactivated or moved since
        // the claim), and goes out once the database answers.
        proxy.stall();
        held.answer(0);
        await expect(held.receiver.waitFor(3, 300)).rejects.toThrow(/2 of 3/);
        proxy.restore();
        await held.receiver.waitFor(3, 5_000);
        held.answerAll();
        await logRows(db, webhookId, 6);
        const { deliveries } = await recorded(db, webhookId);
        expect(deliveries).toEqual([{ status: "success", attempts: 1, n: 6 }]);
        expect(new Set(held.receiver.requests.map((r) => r.body.event_id)).size).toBe(6);
      }));

    it("what was claimed ahead and not sent when the worker stops is handed back: due again, its attempt undone", () =>
      // One at once: the first sent, the second held ahead.
      scenario(4, 1, async ({ db, webhookId, worker: w, held }) => {
        await held.receiver.waitFor(1);
        await claimed(db, webhookId, 2);
        const stopped = w.stop();
        held.answerAll();
        await stopped;
        const { deliveries, log } = await recorded(db, webhookId);
        // One sent and recorded; the one held ahead and the two never claimed are pending, unattempted.
        expect(deliveries).toEqual([
          { status: "pending", attempts: 0, n: 3 },
          { status: "success", attempts: 1, n: 1 },
        ]);
        expect(log).toHaveLength(1);
        const { rows } = await db.query<{ due: boolean }>(
          `SELECT bool_and("NEXT_AT" <= now()) AS due FROM "TB_WEBHOOK_DELIVERY"
            WHERE "WEBHOOK_ID" = $1 AND "STATUS" = 'pending'`,
          [webhookId],
        );
        expect(rows[0]!.due).toBe(true);
        expect(held.receiver.requests).toHaveLength(1);
      }));

    it("a delivery it holds is not claimed again by the worker, even once its lease has run out", () =>
      // One at once: the first sent, the second held ahead.
      scenario(3, 1, async ({ db, webhookId, held }) => {
        await held.receiver.waitFor(1);
        await claimed(db, webhookId, 2);
        // The held one's lease runs out (as a stalled worker's would): due again in the table.
        await db.query(
          `UPDATE "TB_WEBHOOK_DELIVERY" SET "NEXT_AT" = now() - interval '1 second'
            WHERE "WEBHOOK_ID" = $1 AND "ATTEMPTS" = 1 AND "OUTBOX_ID" <> $2::bigint`,
          [webhookId, held.receiver.requests[0]!.body.event_id],
        );
        held.answerAll();
        await logRows(db, webhookId, 3);
        const { deliveries } = await recorded(db, webhookId);
        expect(deliveries).toEqual([{ status: "success", attempts: 1, n: 3 }]);
        expect(held.receiver.requests.map((r) => r.body.event_id).sort()).toEqual([
          "900001",
          "900002",
          "900003",
        ]);
      }));
    it("a hand-back leaves alone a delivery another worker has claimed since", () =>
      scenario(2, 1, async ({ db, webhookId, worker: w, held }) => {
        await held.receiver.waitFor(1);
        await claimed(db, webhookId, 2);
        // Another worker claims the held one (its lease having run out): a further attempt, a new lease.
        const sent = held.receiver.requests[0]!.body.event_id;
        await db.query(
          `UPDATE "TB_WEBHOOK_DELIVERY" SET "ATTEMPTS" = "ATTEMPTS" + 1, "NEXT_AT" = now() + interval '1 minute'
            WHERE "WEBHOOK_ID" = $1 AND "OUTBOX_ID" <> $2::bigint`,
          [webhookId, sent],
        );
        const stopped = w.stop();
        held.answerAll();
        await stopped;
        const { rows } = await db.query<{ status: string; attempts: number; later: boolean }>(
          `SELECT "STATUS" AS status, "ATTEMPTS" AS attempts, "NEXT_AT" > now() AS later
             FROM "TB_WEBHOOK_DELIVERY" WHERE "WEBHOOK_ID" = $1 AND "OUTBOX_ID" <> $2::bigint`,
          [webhookId, sent],
        );
        expect(rows).toEqual([{ status: "pending", attempts: 2, later: true }]);
        expect(held.receiver.requests).toHaveLength(1);
      }));
  });
