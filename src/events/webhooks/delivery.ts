// The webhook delivery worker (spec 6.1.3–6.1.5, decisions.md §8). Works off TB_WEBHOOK_DELIVERY:
// claims due deliveries (FOR UPDATE SKIP LOCKED, so several workers can run), sends each attempt,
// and writes one TB_WEBHOOK_LOG row per attempt: `success`, `retrying` (another attempt after
// 2^attempt × WEBHOOK_RETRY_BASE_MS) or `failed` (the last of RETRY_COUNT + 1 attempts).
//
// - Pending retries are rows with a NEXT_AT: they survive a restart. A claimed row's NEXT_AT is
//   moved past twice its time-out first (a lease), so a worker that dies mid-attempt leaves it to
//   be tried again.
// - Claimed ahead: a worker holds up to twice what it may send at once (in all, per registration,
//   per tenant); a slot whose attempt ends starts the next held delivery that fits (oldest claim
//   first) at once, without waiting for a statement. A held delivery waits for about one attempt
//   of its registration or tenant to end (hence the lease of twice the time-out); one that waited
//   longer than that, and one not sent when the worker stops, is handed back (due again, its
//   attempt undone). A worker never claims again a delivery it holds.
// - An attempt's outcome (the delivery's new state and its log row) is written by the statement
//   that claims more: one round trip for the attempts that finished while the previous statement
//   was out. An outcome the database did not take (a blip) is kept and written by the next
//   statement, not sent again.
// - Bounded concurrency, in all, per tenant and per registration: a slow or dead receiver holds
//   at most its own slots, and one tenant's receivers at most the tenant's share (issue 18), so
//   they never delay the others.
// - Re-checked before sending: right before an attempt the worker reads its registration again
//   (one statement for the attempts that start together). A delivery whose registration is gone
//   or inactive is cancelled (after earlier attempts, with a last `failed` log row saying so, so
//   that the log does not end on `retrying`); one whose URL changed since the claim is handed
//   back (claimed again, it goes to the new URL), and so is one whose registration changed
//   registrant since the claim (claimed again, it carries the body made for the new registrant,
//   or it was cancelled: src/events/webhooks/takeover.ts); otherwise it is sent with the current
//   secret. A delivery claimed ahead is never sent to a registration deleted, deactivated, moved
//   to another URL or taken over meanwhile. A hand-back or a retry does not revive a delivery
//   cancelled meanwhile (the registration deleted, or taken over by a registrant who may not see
//   it).
// - Quiet when idle (issue 18): when nothing is pending the worker sleeps until its safety-net
//   poll (or a wake-up: the dispatcher queued deliveries, an attempt finished); the poll asks one
//   cheap "next due" question and claims only when something is due.
import type { Logger } from "../../logger.ts";
import type { Database } from "../../types.ts";
import { PREPARED } from "../statements.ts";
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
  /** The registration's registrant at the claim (TB_WEBHOOK.CREATED_BY): whom BODY was made for. */
  REGISTRANT: string | null;
}

export interface DeliveryWorker {
  start(): void;
  /** New deliveries were queued (the dispatcher of this process). */
  wake(): void;
  stop(): Promise<void>;
}

/**
 * How far ahead a worker claims: it holds up to this many times its sending bounds, so that a slot
 * whose attempt ends starts the next delivery at once while the statement that records the
 * attempt claims more (one receiver's rate is then its answers', not the statements').
 */
const CLAIM_AHEAD = 2;

/** A claim's lease beyond the attempt's time-out (the claim sets it to twice the time-out + this). */
const LEASE_SPARE_MS = 30_000;

/**
 * Records the outcomes of finished attempts ($8–$14 and $16, one array element per delivery: its
 * new state and, for an attempt made, its log row; a delivery handed back unsent has its attempt
 * undone, unless another claim has taken it since (its ATTEMPTS moved on) or it was cancelled
 * meanwhile; a retry leaves a delivery cancelled meanwhile cancelled), then claims due
 * deliveries that fit: at most $1 in all, per registration $2 less what it holds ($3, by
 * WEBHOOK_ID), per tenant $6 less what it holds ($7, by tenant); "holds" are the
 * deliveries claimed and not yet finished, the recorded ones' are free again. One statement, its
 * own transaction: finished attempts' outcomes and the next claims cost one round trip. The
 * deliveries this worker holds ($15) are never claimed again by it, even past their lease.
 *
 * Registrations and tenants already at their bound ($4, $5) are left out of the scan, so its window
 * (the oldest $1 × $2 due rows) always holds something this worker may take; a registration behind
 * the window is reached once those ahead of it are at their bound (the worker claims again at once
 * while a claim finds rows). The window is read without locks: only the rows picked are locked
 * (SKIP LOCKED), and one another worker claimed meanwhile (its lease moved NEXT_AT) fails the
 * re-check and is left out. A claim writes nothing to the rows it does not take (under a backlog,
 * locking the whole window would be a row lock per row of it, per claim). The deliveries being
 * recorded are never claimed by the same statement (their lease may have run out meanwhile).
 */
const RECORD_AND_CLAIM_SQL = `
  WITH outcome AS (
    SELECT * FROM unnest($8::bigint[], $9::text[], $10::text[], $11::int[], $12::text[], $13::float8[], $14::int[], $16::int[])
      AS o(delivery_id, state, log_status, http_status, error, wait_ms, attempts_back, claimed_attempts)),
  moved AS (
    UPDATE "TB_WEBHOOK_DELIVERY" d
       SET "STATUS" = CASE WHEN d."STATUS" = 'cancelled' AND o.state = 'pending' THEN 'cancelled' ELSE o.state END,
           "NEXT_AT" = now() + make_interval(secs => o.wait_ms / 1000.0),
           "ATTEMPTS" = d."ATTEMPTS" - o.attempts_back
      FROM outcome o
     WHERE d."DELIVERY_ID" = o.delivery_id
       AND (o.attempts_back = 0 OR (d."ATTEMPTS" = o.claimed_attempts AND d."STATUS" = 'pending'))
    RETURNING d."WEBHOOK_ID", d."OUTBOX_ID", d."ATTEMPTS", o.log_status, o.http_status, o.error),
  logged AS (
    INSERT INTO "TB_WEBHOOK_LOG" ("WEBHOOK_ID", "OUTBOX_ID", "STATUS", "HTTP_STATUS", "ERROR_MESSAGE", "ATTEMPT_COUNT")
    SELECT "WEBHOOK_ID", "OUTBOX_ID", log_status, http_status, error, "ATTEMPTS" FROM moved
     WHERE log_status IS NOT NULL),
  due AS (
    SELECT d."DELIVERY_ID", d."WEBHOOK_ID", d."NEXT_AT", w."SOURCE"
      FROM "TB_WEBHOOK_DELIVERY" d JOIN "TB_WEBHOOK" w ON w."WEBHOOK_ID" = d."WEBHOOK_ID"
     WHERE d."STATUS" = 'pending' AND d."NEXT_AT" <= now()
       AND NOT (d."WEBHOOK_ID" = ANY($4::int[])) AND NOT (w."SOURCE" = ANY($5::text[]))
       AND NOT (d."DELIVERY_ID" = ANY($8::bigint[])) AND NOT (d."DELIVERY_ID" = ANY($15::bigint[]))
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
         "NEXT_AT" = now() + make_interval(secs => (2 * w."TIMEOUT_MS" + ${LEASE_SPARE_MS}) / 1000.0)
    FROM "TB_WEBHOOK" w
   WHERE d."DELIVERY_ID" IN (SELECT "DELIVERY_ID" FROM locked) AND w."WEBHOOK_ID" = d."WEBHOOK_ID"
  RETURNING d."DELIVERY_ID"::text AS "DELIVERY_ID", d."WEBHOOK_ID", d."OUTBOX_ID"::text AS "OUTBOX_ID",
            d."EVENT_TYPE", d."BODY", d."ATTEMPTS", w."URL", w."SECRET", w."RETRY_COUNT", w."TIMEOUT_MS", w."ACTIVE",
            w."SOURCE" AS "TENANT_ID", w."CREATED_BY" AS "REGISTRANT"`;

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

/** A registration as it is now, re-read right before an attempt (null: deleted). */
interface RegistrationNow {
  WEBHOOK_ID: number;
  URL: string;
  SECRET: string | null;
  ACTIVE: string;
  RETRY_COUNT: number;
  CREATED_BY: string | null;
}

const REGISTRATIONS_NOW_SQL = `
  SELECT "WEBHOOK_ID", "URL", "SECRET", "ACTIVE", "RETRY_COUNT", "CREATED_BY"
    FROM "TB_WEBHOOK" WHERE "WEBHOOK_ID" = ANY($1::int[])`;

/**
 * Reads registrations as they are now, the asks made in one turn of the event loop answered by one
 * statement (the attempts a slot loop starts together).
 */
function registrationReader(db: Database) {
  let asked: Map<number, Array<(r: RegistrationNow | null | Error) => void>> | null = null;
  const run = async (ids: Map<number, Array<(r: RegistrationNow | null | Error) => void>>) => {
    try {
      const { rows } = await db.query<RegistrationNow>(REGISTRATIONS_NOW_SQL, [[...ids.keys()]], PREPARED);
      const byId = new Map(rows.map((r) => [r.WEBHOOK_ID, r]));
      for (const [id, waiting] of ids) for (const w of waiting) w(byId.get(id) ?? null);
    } catch (err) {
      const e = err instanceof Error ? err : new Error(String(err));
      for (const waiting of ids.values()) for (const w of waiting) w(e);
    }
  };
  return (webhookId: number): Promise<RegistrationNow | null> =>
    new Promise((resolve, reject) => {
      if (!asked) {
        const batch = new Map<number, Array<(r: RegistrationNow | null | Error) => void>>();
        asked = batch;
        setImmediate(() => {
          asked = null;
          void run(batch);
        });
      }
      const waiting = asked.get(webhookId) ?? [];
      waiting.push((r) => (r instanceof Error ? reject(r) : resolve(r)));
      asked.set(webhookId, waiting);
    });
}

/** A finished attempt, to be recorded: the delivery's new state and, unless cancelled, its log row. */
interface Outcome {
  deliveryId: string;
  /** TB_WEBHOOK_DELIVERY.STATUS after it: pending (retrying), success, failed or cancelled. */
  state: "pending" | "success" | "failed" | "cancelled";
  /** TB_WEBHOOK_LOG.STATUS; null for a cancelled delivery (no attempt was made). */
  logStatus: "success" | "retrying" | "failed" | null;
  httpStatus: number | null;
  error: string | null;
  /** Until the next attempt (retrying), from the recording. */
  waitMs: number;
  /** 1 for a delivery claimed and handed back unsent (the worker stopped): its attempt is undone. */
  attemptsBack: 0 | 1;
  /** Its ATTEMPTS as claimed: a hand-back applies only while the row is still this claim's. */
  claimedAttempts: number;
}

/**
 * The outcome of a delivery not sent, the claim's attempt undone: handed back (due again at once;
 * no log row) or cancelled (its registration is gone or inactive: `why`). A cancelled delivery
 * with earlier attempts (logged `retrying`) gets a last log row, `failed` with the reason, so
 * that its log ends in a final state; one never attempted gets none.
 */
function unsent(d: ClaimedDelivery, why: "handed back" | { cancelled: string }): Outcome {
  const back = why === "handed back";
  const logged = !back && d.ATTEMPTS > 1;
  return {
    deliveryId: d.DELIVERY_ID,
    state: back ? "pending" : "cancelled",
    logStatus: logged ? "failed" : null,
    httpStatus: null,
    error: logged ? why.cancelled : null,
    waitMs: 0,
    attemptsBack: 1,
    claimedAttempts: d.ATTEMPTS,
  };
}

/** A delivery a worker holds: claimed at `claimedAt`; `attempt` once it is being sent. */
interface Held {
  d: ClaimedDelivery;
  claimedAt: number;
  attempt: Promise<void> | null;
}

/** How many of `held` there are: in all, per registration and per tenant; `add` counts one more. */
function tally(held: Iterable<Held>) {
  const perWebhook = new Map<number, number>();
  const perTenant = new Map<string, number>();
  const counts = {
    all: 0,
    perWebhook,
    perTenant,
    add(d: ClaimedDelivery) {
      counts.all++;
      perWebhook.set(d.WEBHOOK_ID, (perWebhook.get(d.WEBHOOK_ID) ?? 0) + 1);
      perTenant.set(d.TENANT_ID, (perTenant.get(d.TENANT_ID) ?? 0) + 1);
    },
  };
  for (const h of held) counts.add(h.d);
  return counts;
}

export function createDeliveryWorker(opts: DeliveryWorkerOptions): DeliveryWorker {
  const { db, logger } = opts;
  const send = opts.send ?? sendAttempt;
  // Connections kept open between attempts to the same receiver (closed on stop).
  const agents = attemptAgents();
  const registrationNow = registrationReader(db);
  /**
   * The deliveries this worker holds (claimed, not yet finished), in claim order: each queued
   * until it is sent (`attempt` then set). Everything the bounds count is read from here; the
   * claim leaves these out.
   */
  const held = new Map<string, Held>();
  /**
   * Attempts sent and not yet recorded: the next statement records them with its claim. A slot's
   * outcome waits here, not in a statement of its own; one that cannot be recorded (the database
   * away) stays here for the next try instead of being sent again when its lease runs out.
   */
  const finished: Outcome[] = [];
  let active = false;
  let pumping: Promise<void> | null = null;
  let again = false;
  /** The next pump starts with the "next due" question (a poll), not with a claim. */
  let polled = false;
  let timer: NodeJS.Timeout | null = null;

  /**
   * A worker holds (claims ahead of sending) up to twice its sending bounds: in all, per
   * registration and per tenant.
   */
  const bounds = {
    all: CLAIM_AHEAD * opts.concurrency,
    perReceiver: CLAIM_AHEAD * opts.concurrencyPerReceiver,
    perTenant: CLAIM_AHEAD * opts.concurrencyPerTenant,
  };
  /** Registrations and tenants holding all they may: left out of the claim and the "next due" question. */
  const saturated = () => {
    const { perWebhook, perTenant } = tally(held.values());
    return {
      webhooks: [...perWebhook].filter(([, n]) => n >= bounds.perReceiver).map(([id]) => id),
      tenants: [...perTenant].filter(([, n]) => n >= bounds.perTenant).map(([id]) => id),
    };
  };
  /** The attempts being sent. */
  const sending = () => [...held.values()].filter((h) => h.attempt !== null);

  /** What an attempt's result leaves: success, another attempt later, or the last one failed. */
  function outcomeOf(d: ClaimedDelivery, result: AttemptResult): Outcome {
    const attempt = d.ATTEMPTS;
    const logStatus = result.ok ? "success" : attempt > d.RETRY_COUNT ? "failed" : "retrying";
    return {
      deliveryId: d.DELIVERY_ID,
      state: logStatus === "retrying" ? "pending" : logStatus,
      logStatus,
      httpStatus: result.httpStatus,
      error: result.error?.slice(0, 1000) ?? null,
      waitMs: logStatus === "retrying" ? 2 ** attempt * opts.retryBaseMs : 0,
      attemptsBack: 0,
      claimedAttempts: attempt,
    };
  }

  /** Sends one attempt; its outcome joins `finished` (none if it broke: its lease runs out). */
  async function attempt(claimed: ClaimedDelivery): Promise<void> {
    let d = claimed;
    try {
      // The registration as it is now: a change since the claim (a delete, `active: false`, a new
      // URL or secret) is obeyed by the attempts that start after it answered.
      let now: RegistrationNow | null;
      try {
        now = await registrationNow(d.WEBHOOK_ID);
      } catch (err) {
        logger.warn(
          { err, delivery_id: d.DELIVERY_ID },
          "webhook delivery: its registration could not be read before sending; handed back",
        );
        finished.push(unsent(d, "handed back"));
        return;
      }
      if (now === null || now.ACTIVE !== "Y") {
        finished.push(
          unsent(d, {
            cancelled:
              now === null ? "not sent: the webhook was deleted" : "not sent: the webhook was deactivated",
          }),
        );
        return;
      }
      if (now.URL !== d.URL || now.CREATED_BY !== d.REGISTRANT) {
        // Claimed again, it goes to the new URL, with the body made for the new registrant.
        finished.push(unsent(d, "handed back"));
        return;
      }
      d = { ...d, SECRET: now.SECRET, RETRY_COUNT: now.RETRY_COUNT };
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
      finished.push(outcomeOf(d, result));
    } catch (err) {
      // The lease on the row runs out and another round tries it again.
      logger.error(
        { err, delivery_id: d.DELIVERY_ID },
        "webhook delivery attempt failed unexpectedly; it is tried again when its claim runs out",
      );
    }
  }

  /**
   * Sends what is queued, oldest claim first, while its registration, its tenant and the worker
   * have a free slot. One that waited so long that less than its time-out (and half the spare) is
   * left of its lease is handed back instead (another worker may claim it once the lease runs out).
   */
  function sendQueued(): void {
    const now = Date.now();
    const out = tally(sending());
    for (const h of held.values()) {
      if (h.attempt) continue;
      const { d } = h;
      if (now - h.claimedAt > d.TIMEOUT_MS + LEASE_SPARE_MS / 2) {
        held.delete(d.DELIVERY_ID);
        finished.push(unsent(d, "handed back"));
      } else if (
        active &&
        out.all < opts.concurrency &&
        (out.perWebhook.get(d.WEBHOOK_ID) ?? 0) < opts.concurrencyPerReceiver &&
        (out.perTenant.get(d.TENANT_ID) ?? 0) < opts.concurrencyPerTenant
      ) {
        out.add(d);
        h.attempt = attempt(d).finally(() => {
          held.delete(d.DELIVERY_ID);
          // The slot takes the next delivery claimed ahead now; the statement that records this
          // attempt's outcome claims more.
          sendQueued();
          wake();
        });
      }
    }
  }

  /**
   * Records every finished attempt and claims what fits (nothing once stopped), in one statement.
   * Should it fail, the outcomes stay to be recorded by the next one.
   */
  async function recordAndClaim(): Promise<number> {
    const free = active ? bounds.all - held.size : 0;
    if (free <= 0 && finished.length === 0) return 0;
    const outcomes = finished.splice(0);
    const full = saturated();
    const holding = tally(held.values());
    let rows: ClaimedDelivery[];
    try {
      ({ rows } = await db.query<ClaimedDelivery>(RECORD_AND_CLAIM_SQL, [
        Math.max(0, free),
        bounds.perReceiver,
        JSON.stringify(Object.fromEntries(holding.perWebhook)),
        full.webhooks,
        full.tenants,
        bounds.perTenant,
        JSON.stringify(Object.fromEntries(holding.perTenant)),
        outcomes.map((o) => o.deliveryId),
        outcomes.map((o) => o.state),
        outcomes.map((o) => o.logStatus),
        outcomes.map((o) => o.httpStatus),
        outcomes.map((o) => o.error),
        outcomes.map((o) => o.waitMs),
        outcomes.map((o) => o.attemptsBack),
        [...held.keys()],
        outcomes.map((o) => o.claimedAttempts),
      ]));
    } catch (err) {
      finished.unshift(...outcomes);
      throw err;
    }
    for (const o of outcomes) {
      // A cancelled delivery's last log row is no attempt.
      if (o.logStatus && o.state !== "cancelled") opts.onAttempt?.(o.logStatus);
      if (o.logStatus === "retrying") schedule(o.waitMs, false);
    }
    const claimedAt = Date.now();
    for (const d of rows) held.set(d.DELIVERY_ID, { d, claimedAt, attempt: null });
    sendQueued();
    return rows.length;
  }

  /** Hands back what was claimed and not sent (the worker stops): due again at once, the attempt undone. */
  function handBackQueued(): void {
    for (const { d, attempt } of held.values()) {
      if (attempt) continue;
      held.delete(d.DELIVERY_ID);
      finished.push(unsent(d, "handed back"));
    }
  }

  /**
   * Records what finished, claims what is due and fits and sends what it may; then sleeps until
   * the next due time. Woken by the poll with nothing to record, it first asks whether anything is
   * due at all (one statement), and claims only then.
   */
  async function pump(): Promise<void> {
    do {
      again = false;
      try {
        if (polled) {
          polled = false;
          if (finished.length === 0) {
            const wait = await nextDue();
            if (wait === null || wait > 0) {
              schedule(waitAfter(wait, opts.pollMs), wait === null);
              continue;
            }
          }
        }
        const claimed = await recordAndClaim();
        if (claimed > 0) again = true;
        // All it may hold is held: a finished delivery wakes the worker.
        else if (held.size < bounds.all) {
          const wait = await nextDue();
          schedule(waitAfter(wait, opts.pollMs), wait === null);
        }
      } catch (err) {
        logger.warn({ err }, "webhook worker: recording or claiming deliveries failed; retrying");
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
      await Promise.allSettled(sending().map((h) => h.attempt));
      // The last attempts' outcomes, and the deliveries claimed ahead handed back (their leases
      // would otherwise hold them, or send them again).
      handBackQueued();
      try {
        await recordAndClaim();
      } catch (err) {
        logger.warn(
          { err, deliveries: finished.length },
          "webhook worker: outcomes not recorded at stop; those deliveries are sent again when their claims run out",
        );
      }
      agents.destroy();
    },
  };
}
