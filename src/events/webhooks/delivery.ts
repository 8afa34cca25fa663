// The webhook delivery worker (spec 6.1.3–6.1.5, decisions.md §8). Works off TB_WEBHOOK_DELIVERY:
// claims due deliveries (FOR UPDATE SKIP LOCKED, so several workers can run), sends each attempt,
// and writes one TB_WEBHOOK_LOG row per attempt: `success`, `retrying` (another attempt after
// 2^attempt × WEBHOOK_RETRY_BASE_MS) or `failed` (the last of RETRY_COUNT + 1 attempts).
//
// - Pending retries are rows with a NEXT_AT: they survive a restart. A claimed row's NEXT_AT is
//   moved past its time-out first (a lease), so a worker that dies mid-attempt leaves it to be
//   tried again.
// - Bounded concurrency, in all, per tenant and per registration: a slow or dead receiver holds
//   at most its own slots, and one tenant's receivers at most the tenant's share (issue 18), so
//   they never delay the others.
// - Quiet when idle (issue 18): when nothing is pending the worker sleeps until its safety-net
//   poll (or a wake-up: the dispatcher queued deliveries, an attempt finished); the poll asks one
//   cheap "next due" question and claims only when something is due.
import type { Logger } from "../../logger.ts";
import type { Database } from "../../types.ts";
import { type AttemptResult, attemptAgents, sendAttempt } from "./send.ts";

export interface DeliveryWorkerOptions {
  db: Database;
  logger: Logger;
  retryBaseMs: number;
  allowPrivate: boolean;
  concurrency: number;
  concurrencyPerReceiver: number;
  /** Deliveries in flight for one tenant's registrations together. */
  concurrencyPerTenant: number;
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
  TENANT_ID: string;
}

export interface DeliveryWorker {
  start(): void;
  /** New deliveries were queued (the dispatcher of this process). */
  wake(): void;
  stop(): Promise<void>;
}

/**
 * Claims due deliveries that fit: at most $1 in all, per registration $2 less what it has in flight
 * ($3, by WEBHOOK_ID), per tenant $6 less what it has in flight ($7, by tenant). Registrations and
 * tenants already at their bound ($4, $5) are left out of the scan, so its window (the oldest
 * $1 × $2 due rows) always holds something this worker may take; a registration behind the window
 * is reached once those ahead of it are at their bound (the worker claims again at once while a
 * claim finds rows). The window is read without locks: only the rows picked are locked (SKIP
 * LOCKED), and one another worker claimed meanwhile (its lease moved NEXT_AT) fails the re-check
 * and is left out. A claim writes nothing to the rows it does not take (under a backlog, locking
 * the whole window would be a row lock per row of it, per claim).
 */
const CLAIM_SQL = `
  WITH due AS (
    SELECT d."DELIVERY_ID", d."WEBHOOK_ID", d."NEXT_AT", w."SOURCE"
      FROM "TB_WEBHOOK_DELIVERY" d JOIN "TB_WEBHOOK" w ON w."WEBHOOK_ID" = d."WEBHOOK_ID"
     WHERE d."STATUS" = 'pending' AND d."NEXT_AT" <= now()
       AND NOT (d."WEBHOOK_ID" = ANY($4::int[])) AND NOT (w."SOURCE" = ANY($5::text[]))
     ORDER BY d."NEXT_AT", d."DELIVERY_ID"
     LIMIT $1::int * $2::int),
  per_webhook AS (
    SELECT "DELIVERY_ID", "WEBHOOK_ID", "NEXT_AT", "SOURCE",
           row_number() OVER (PARTITION BY "WEBHOOK_ID" ORDER BY "NEXT_AT", "DELIVERY_ID") AS rn
      FROM due),
  per_tenant AS (
    SELECT "DELIVERY_ID", "NEXT_AT", "SOURCE",
           row_number() OVER (PARTITION BY "SOURCE" ORDER BY "NEXT_AT", "DELIVERY_ID") AS tn
      FROM per_webhook
     WHERE rn <= $2::int - COALESCE(($3::jsonb ->> "WEBHOOK_ID"::text)::int, 0)),
  picked AS (
    SELECT "DELIVERY_ID" FROM per_tenant
     WHERE tn <= $6::int - COALESCE(($7::jsonb ->> "SOURCE")::int, 0)
     ORDER BY "NEXT_AT", "DELIVERY_ID"
     LIMIT $1),
  locked AS (
    SELECT d."DELIVERY_ID"
      FROM "TB_WEBHOOK_DELIVERY" d
     WHERE d."DELIVERY_ID" IN (SELECT "DELIVERY_ID" FROM picked)
       AND d."STATUS" = 'pending' AND d."NEXT_AT" <= now()
       FOR UPDATE SKIP LOCKED)
  UPDATE "TB_WEBHOOK_DELIVERY" d
     SET "ATTEMPTS" = d."ATTEMPTS" + 1,
         "NEXT_AT" = now() + make_interval(secs => (w."TIMEOUT_MS" + 30000) / 1000.0)
    FROM "TB_WEBHOOK" w
   WHERE d."DELIVERY_ID" IN (SELECT "DELIVERY_ID" FROM locked) AND w."WEBHOOK_ID" = d."WEBHOOK_ID"
  RETURNING d."DELIVERY_ID"::text AS "DELIVERY_ID", d."WEBHOOK_ID", d."OUTBOX_ID"::text AS "OUTBOX_ID",
            d."EVENT_TYPE", d."BODY", d."ATTEMPTS", w."URL", w."SECRET", w."RETRY_COUNT", w."TIMEOUT_MS", w."ACTIVE",
            w."SOURCE" AS "TENANT_ID"`;

/**
 * Milliseconds until the next pending delivery this worker could take (negative: due already), or
 * NULL when there is none: one index probe on ("STATUS", "NEXT_AT").
 */
const NEXT_DUE_SQL = `
  SELECT EXTRACT(EPOCH FROM ((
    SELECT d."NEXT_AT"
      FROM "TB_WEBHOOK_DELIVERY" d JOIN "TB_WEBHOOK" w ON w."WEBHOOK_ID" = d."WEBHOOK_ID"
     WHERE d."STATUS" = 'pending'
       AND NOT (d."WEBHOOK_ID" = ANY($1::int[])) AND NOT (w."SOURCE" = ANY($2::text[]))
     ORDER BY d."NEXT_AT"
     LIMIT 1) - now())) * 1000 AS wait_ms`;

/** The wait after a "next due" answer: the poll when nothing is pending, else until it is due. */
export function waitAfter(waitMs: number | string | null | undefined, pollMs: number): number {
  if (waitMs === null || waitMs === undefined) return pollMs;
  return Math.min(pollMs, Math.max(0, Math.ceil(Number(waitMs))) + 20);
}

export function createDeliveryWorker(opts: DeliveryWorkerOptions): DeliveryWorker {
  const { db, logger } = opts;
  const send = opts.send ?? sendAttempt;
  // Connections kept open between attempts to the same receiver (closed on stop).
  const agents = attemptAgents();
  /** Deliveries in flight per registration and per tenant. */
  const inFlight = new Map<number, number>();
  const inFlightPerTenant = new Map<string, number>();
  const running = new Set<Promise<void>>();
  let active = false;
  let pumping: Promise<void> | null = null;
  let again = false;
  /** The next pump starts with the "next due" question (a poll), not with a claim. */
  let polled = false;
  let timer: NodeJS.Timeout | null = null;

  const total = () => running.size;
  const count = <K>(m: Map<K, number>, key: K, by: number) => {
    const n = (m.get(key) ?? 0) + by;
    if (n <= 0) m.delete(key);
    else m.set(key, n);
  };
  /** Registrations and tenants at their bound: left out of the claim and the "next due" question. */
  const saturated = () => ({
    webhooks: [...inFlight].filter(([, n]) => n >= opts.concurrencyPerReceiver).map(([id]) => id),
    tenants: [...inFlightPerTenant].filter(([, n]) => n >= opts.concurrencyPerTenant).map(([id]) => id),
  });

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
    if (status === "retrying") schedule(waitMs, false);
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
        agents,
      });
      if (result.detail)
        logger.info(
          { webhook_id: d.WEBHOOK_ID, delivery_id: d.DELIVERY_ID, detail: result.detail },
          `webhook delivery: ${result.error}`,
        );
      await record(d, result);
    } catch (err) {
      // The lease on the row runs out and another round tries it again.
      logger.error({ err, delivery_id: d.DELIVERY_ID }, "webhook delivery could not be recorded");
    }
  }

  async function claim(): Promise<ClaimedDelivery[]> {
    const free = opts.concurrency - total();
    if (free <= 0) return [];
    const full = saturated();
    // One statement, its own transaction: the rows it locks are updated and released at once.
    const { rows } = await db.query<ClaimedDelivery>(CLAIM_SQL, [
      free,
      opts.concurrencyPerReceiver,
      JSON.stringify(Object.fromEntries(inFlight)),
      full.webhooks,
      full.tenants,
      opts.concurrencyPerTenant,
      JSON.stringify(Object.fromEntries(inFlightPerTenant)),
    ]);
    return rows;
  }

  function launch(d: ClaimedDelivery) {
    count(inFlight, d.WEBHOOK_ID, 1);
    count(inFlightPerTenant, d.TENANT_ID, 1);
    const p = deliver(d).finally(() => {
      count(inFlight, d.WEBHOOK_ID, -1);
      count(inFlightPerTenant, d.TENANT_ID, -1);
      running.delete(p);
      wake();
    });
    running.add(p);
  }

  /**
   * Claims and launches what is due and fits; then sleeps until the next due time. Woken by the
   * poll, it first asks whether anything is due at all (one statement), and claims only then.
   */
  async function pump(): Promise<void> {
    do {
      again = false;
      try {
        if (polled) {
          polled = false;
          const wait = await nextDue();
          if (wait === null || wait > 0) {
            schedule(waitAfter(wait, opts.pollMs), wait === null);
            continue;
          }
        }
        const claimed = await claim();
        for (const d of claimed) launch(d);
        if (claimed.length > 0) again = true;
        // All slots taken: a finished delivery wakes the worker.
        else if (total() < opts.concurrency) {
          const wait = await nextDue();
          schedule(waitAfter(wait, opts.pollMs), wait === null);
        }
      } catch (err) {
        logger.warn({ err }, "webhook worker: claiming deliveries failed; retrying");
        schedule(1000, false);
      }
    } while (again && active);
  }

  /** Milliseconds until the next delivery is due that this worker could take; null: none pending. */
  async function nextDue(): Promise<number | null> {
    const full = saturated();
    const { rows } = await db.query<{ wait_ms: number | string | null }>(NEXT_DUE_SQL, [
      full.webhooks,
      full.tenants,
    ]);
    const wait = rows[0]?.wait_ms;
    return wait === null || wait === undefined ? null : Number(wait);
  }

  /** Wakes the worker after `ms`; `poll`: the safety net (nothing was pending), which asks first. */
  function schedule(ms: number, poll: boolean) {
    if (!active) return;
    if (timer) clearTimeout(timer);
    timer = setTimeout(
      () => {
        timer = null;
        if (poll) polled = true;
        wake();
      },
      Math.max(0, ms),
    );
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
      // A wake-up that came after the pump's last look (between its end and this) is not lost.
      if (again) wake();
    });
  }

  return {
    start() {
      if (active) return;
      active = true;
      wake();
    },
    wake() {
      // Work was queued: claim at once (not the poll's question first).
      polled = false;
      wake();
    },
    async stop() {
      active = false;
      if (timer) clearTimeout(timer);
      await pumping;
      await Promise.allSettled([...running]);
      agents.destroy();
    },
  };
}
