// The webhook delivery worker (spec 6.1.3–6.1.5, decisions.md §8). Works off TB_WEBHOOK_DELIVERY:
// claims due deliveries (FOR UPDATE SKIP LOCKED, so several workers can run), sends each attempt,
// and writes one TB_WEBHOOK_LOG row per attempt: `success`, `retrying` (another attempt after
// 2^attempt × WEBHOOK_RETRY_BASE_MS) or `failed` (the last of RETRY_COUNT + 1 attempts).
//
// - Pending retries are rows with a NEXT_AT: they survive a restart. A claimed row's NEXT_AT is
//   moved past its time-out first (a lease), so a worker that dies mid-attempt leaves it to be
//   tried again.
// - Bounded concurrency, in all and per registration: a slow or dead receiver holds at most its
//   own slots and never delays the others.
import type { Logger } from "../../logger.ts";
import type { Database } from "../../types.ts";
import { type AttemptResult, sendAttempt } from "./send.ts";

export interface DeliveryWorkerOptions {
  db: Database;
  logger: Logger;
  retryBaseMs: number;
  allowPrivate: boolean;
  concurrency: number;
  concurrencyPerReceiver: number;
  /** Longest sleep when nothing is due. */
  pollMs: number;
  /** Told of every attempt's outcome (metrics). */
  onAttempt?: (status: "success" | "retrying" | "failed") => void;
  /** The HTTP attempt (replaceable for a different transport). */
  send?: typeof sendAttempt;
}

interface ClaimedDelivery {
  DELIVERY_ID: string;
  WEBHOOK_ID: number;
  OUTBOX_ID: string;
  EVENT_TYPE: string;
  BODY: string;
  ATTEMPTS: number;
  URL: string;
  SECRET: string | null;
  RETRY_COUNT: number;
  TIMEOUT_MS: number;
  ACTIVE: string;
}

export interface DeliveryWorker {
  start(): void;
  /** New deliveries were queued (the dispatcher of this process). */
  wake(): void;
  stop(): Promise<void>;
}

const CLAIM_SQL = `
  WITH due AS (
    SELECT "DELIVERY_ID", "WEBHOOK_ID", "NEXT_AT"
      FROM "TB_WEBHOOK_DELIVERY"
     WHERE "STATUS" = 'pending' AND "NEXT_AT" <= now()
     ORDER BY "NEXT_AT", "DELIVERY_ID"
     LIMIT 1000
       FOR UPDATE SKIP LOCKED),
  ranked AS (
    SELECT "DELIVERY_ID", "WEBHOOK_ID", "NEXT_AT",
           row_number() OVER (PARTITION BY "WEBHOOK_ID" ORDER BY "NEXT_AT", "DELIVERY_ID") AS rn
      FROM due),
  picked AS (
    SELECT "DELIVERY_ID" FROM ranked
     WHERE rn <= $2::int - COALESCE(($3::jsonb ->> "WEBHOOK_ID"::text)::int, 0)
     ORDER BY "NEXT_AT", "DELIVERY_ID"
     LIMIT $1)
  UPDATE "TB_WEBHOOK_DELIVERY" d
     SET "ATTEMPTS" = d."ATTEMPTS" + 1,
         "NEXT_AT" = now() + make_interval(secs => (w."TIMEOUT_MS" + 30000) / 1000.0)
    FROM "TB_WEBHOOK" w
   WHERE d."DELIVERY_ID" IN (SELECT "DELIVERY_ID" FROM picked) AND w."WEBHOOK_ID" = d."WEBHOOK_ID"
  RETURNING d."DELIVERY_ID"::text AS "DELIVERY_ID", d."WEBHOOK_ID", d."OUTBOX_ID"::text AS "OUTBOX_ID",
            d."EVENT_TYPE", d."BODY", d."ATTEMPTS", w."URL", w."SECRET", w."RETRY_COUNT", w."TIMEOUT_MS", w."ACTIVE"`;

export function createDeliveryWorker(opts: DeliveryWorkerOptions): DeliveryWorker {
  const { db, logger } = opts;
  const send = opts.send ?? sendAttempt;
  const inFlight = new Map<number, number>();
  const running = new Set<Promise<void>>();
  let active = false;
  let pumping: Promise<void> | null = null;
  let again = false;
  let timer: NodeJS.Timeout | null = null;

  const total = () => [...inFlight.values()].reduce((a, b) => a + b, 0);

  async function record(d: ClaimedDelivery, result: AttemptResult): Promise<void> {
    const attempt = d.ATTEMPTS;
    const last = attempt > d.RETRY_COUNT;
    const status = result.ok ? "success" : last ? "failed" : "retrying";
    const waitMs = 2 ** attempt * opts.retryBaseMs;
    // One statement (so one round trip and one commit): the delivery's new state and its log row.
    await db.query(
      `WITH moved AS (
         UPDATE "TB_WEBHOOK_DELIVERY"
            SET "STATUS" = $6, "NEXT_AT" = now() + make_interval(secs => $7::float8 / 1000.0)
          WHERE "DELIVERY_ID" = $1::bigint
         RETURNING "WEBHOOK_ID", "OUTBOX_ID")
       INSERT INTO "TB_WEBHOOK_LOG" ("WEBHOOK_ID", "OUTBOX_ID", "STATUS", "HTTP_STATUS", "ERROR_MESSAGE", "ATTEMPT_COUNT")
       SELECT "WEBHOOK_ID", "OUTBOX_ID", $2, $3::int, $4, $5::int FROM moved`,
      [
        d.DELIVERY_ID,
        status,
        result.httpStatus,
        result.error?.slice(0, 1000) ?? null,
        attempt,
        status === "retrying" ? "pending" : status,
        status === "retrying" ? waitMs : 0,
      ],
    );
    opts.onAttempt?.(status);
    if (status === "retrying") schedule(waitMs);
  }

  async function deliver(d: ClaimedDelivery): Promise<void> {
    try {
      if (d.ACTIVE !== "Y") {
        await db.query(
          `UPDATE "TB_WEBHOOK_DELIVERY" SET "STATUS" = 'cancelled' WHERE "DELIVERY_ID" = $1::bigint`,
          [d.DELIVERY_ID],
        );
        return;
      }
      const body = d.BODY;
      const parsed = JSON.parse(body) as { timestamp?: string };
      const result = await send({
        url: d.URL,
        body,
        secret: d.SECRET,
        eventId: d.OUTBOX_ID,
        eventType: d.EVENT_TYPE,
        timestamp: parsed.timestamp ?? new Date().toISOString(),
        timeoutMs: d.TIMEOUT_MS,
        allowPrivate: opts.allowPrivate,
      });
      await record(d, result);
    } catch (err) {
      // The lease on the row runs out and another round tries it again.
      logger.error({ err, delivery_id: d.DELIVERY_ID }, "webhook delivery could not be recorded");
    }
  }

  async function claim(): Promise<ClaimedDelivery[]> {
    const free = opts.concurrency - total();
    if (free <= 0) return [];
    const { rows } = await db.transaction((tx) =>
      tx.query<ClaimedDelivery>(CLAIM_SQL, [
        free,
        opts.concurrencyPerReceiver,
        JSON.stringify(Object.fromEntries(inFlight)),
      ]),
    );
    return rows;
  }

  function launch(d: ClaimedDelivery) {
    inFlight.set(d.WEBHOOK_ID, (inFlight.get(d.WEBHOOK_ID) ?? 0) + 1);
    const p = deliver(d).finally(() => {
      const n = (inFlight.get(d.WEBHOOK_ID) ?? 1) - 1;
      if (n <= 0) inFlight.delete(d.WEBHOOK_ID);
      else inFlight.set(d.WEBHOOK_ID, n);
      running.delete(p);
      wake();
    });
    running.add(p);
  }

  /** Claims and launches what is due and fits; then sleeps until the next due time. */
  async function pump(): Promise<void> {
    do {
      again = false;
      try {
        const claimed = await claim();
        for (const d of claimed) launch(d);
        if (claimed.length > 0) again = true;
        // All slots taken: a finished delivery wakes the worker.
        else if (total() < opts.concurrency) await scheduleNextDue();
      } catch (err) {
        logger.warn({ err }, "webhook worker: claiming deliveries failed; retrying");
        schedule(1000);
      }
    } while (again && active);
  }

  /** Sleeps until the next delivery is due whose receiver has a free slot (or the poll). */
  async function scheduleNextDue(): Promise<void> {
    const saturated = [...inFlight].filter(([, n]) => n >= opts.concurrencyPerReceiver).map(([id]) => id);
    const { rows } = await db.query<{ wait_ms: number | null }>(
      `SELECT GREATEST(0, EXTRACT(EPOCH FROM (min("NEXT_AT") - now())) * 1000)::float8 AS wait_ms
         FROM "TB_WEBHOOK_DELIVERY" WHERE "STATUS" = 'pending' AND NOT ("WEBHOOK_ID" = ANY($1::int[]))`,
      [saturated],
    );
    const wait = rows[0]?.wait_ms;
    schedule(wait === null || wait === undefined ? opts.pollMs : Math.min(opts.pollMs, Math.ceil(wait) + 20));
  }

  function schedule(ms: number) {
    if (!active) return;
    if (timer) clearTimeout(timer);
    timer = setTimeout(wake, Math.max(0, ms));
    timer.unref();
  }

  function wake() {
    if (!active) return;
    if (pumping) {
      again = true;
      return;
    }
    pumping = pump().finally(() => {
      pumping = null;
    });
  }

  return {
    start() {
      if (active) return;
      active = true;
      wake();
    },
    wake,
    async stop() {
      active = false;
      if (timer) clearTimeout(timer);
      await pumping;
      await Promise.allSettled([...running]);
    },
  };
}
