// The outbox relay (decisions.md §8, issue 10): publishes unpublished TB_ANAG_OUTBOX00 rows to the
// bus in OUTBOX_ID order and marks them PUBLISHED_AT only after the bus has confirmed them.
//
// - One relay publishes at a time: a batch is claimed by the relay that takes the turn (a
//   transaction-scoped advisory lock), so several relays (processes) can run, each ready to take
//   over, and rows go out in OUTBOX_ID order (the events of one record in order). A relay that
//   finds the turn taken publishes nothing (the claim sent with its turn is dropped unread): the
//   holder claims again after every batch it published, and every commit wakes every relay, so no
//   row waits for the poll. The claim locks no rows.
// - Woken by NOTIFY (sent by every transaction that writes an event, delivered on commit, to
//   every process), with a slow poll as a safety net. The poll asks one cheap question (is any row
//   unpublished?) and claims only when the answer is yes: an idle relay runs one statement per
//   poll (issue 18).
// - Bus down: while the bus reports no connection the relay claims nothing (no transaction waits
//   on a broker that is gone: on the embedded database that would hold its one connection) and
//   resumes when the connection is back; a publish that fails (refused, dropped with the
//   connection, not confirmed in time) rolls the batch's transaction back and the relay retries
//   with backoff. It never holds more than one batch in memory, and on the in-process bus it
//   publishes only while the subscribers' queues have room (bus.whenRoom): a slow subscriber makes
//   the events wait in the outbox, not in this process's memory. At least once: a crash between
//   publishing and marking
//   publishes the batch again (subscribers deduplicate on the message id).
// - Under a stream of writes the relay gathers: after a round that published rows it waits
//   `gatherMs` before the next claim, so the rows committed meanwhile go out in one transaction
//   (and reach the subscribers as one batch: one commit each, src/events/batching.ts) instead of
//   one or two per round. The first event after a quiet spell is claimed at once.
// - Published rows older than the retention are deleted.
import type { Logger } from "../logger.ts";
import type { Database } from "../types.ts";
import { type BusEvent, BusUnavailableError, type EventBus } from "./bus.ts";
import { OUTBOX_CHANNEL } from "./outbox.ts";
import { inEventTransaction, PREPARED, sendAtCommit } from "./statements.ts";

export interface RelayOptions {
  db: Database;
  /** The database profile `db` is (its events carry it: decisions.md §18); absent for the main. */
  database?: string;
  bus: EventBus;
  logger: Logger;
  batchSize: number;
  pollMs: number;
  retentionMs: number;
  /** After a round that published rows, the wait before the next claim (0: none). */
  gatherMs?: number;
  /** First wait after a failed publish; doubles up to maxBackoffMs. */
  backoffMs?: number;
  maxBackoffMs?: number;
  /** Told of every batch once the bus confirmed it (metrics). */
  onPublished?: (events: readonly BusEvent[]) => void;
}

export interface Relay {
  start(): Promise<void>;
  /** Publish now (after this process's own commits; NOTIFY does it across processes). */
  wake(): void;
  /** Publishes every pending row once; resolves to the number published (tests, tools). */
  drain(): Promise<number>;
  stop(): Promise<void>;
}

interface ClaimedRow {
  OUTBOX_ID: string | number;
  EVENT_TYPE: string;
  AGGREGATE_TYPE: string;
  AGGREGATE_ID: string;
  PAYLOAD: string;
  TENANT_ID: string;
  CREATED_AT: Date | string;
  /** An update's values before it (JSON text), or null. */
  PREVIOUS: string | null;
}

/**
 * The relays' turn: a transaction-scoped advisory lock (decisions.md, "Order with several relays").
 * One relay publishes at a time; the others find the turn taken and wait for the next wake-up.
 */
export const RELAY_TURN_LOCK = 1_785_632_207;

/**
 * The turn, taken in a statement of its own: the claim's snapshot is then taken after the previous
 * holder's marks committed, so it does not see its rows as unpublished. With it, settings of the
 * relay's transaction (set_config(…, true) is SET LOCAL):
 * - synchronous_commit off: the mark need not wait for its WAL flush. Lost in a crash, it only
 *   means the rows are published again, which at-least-once delivery allows and subscribers
 *   deduplicate; the messages themselves were confirmed by the bus before the mark.
 * - no bitmap or sequential scan: the claim walks the partial index on OUTBOX_ID in order and
 *   stops at its LIMIT, whatever the table's statistics say. The rows the relay has marked leave
 *   dead entries in that index until a vacuum: a plain index scan marks them dead as it passes
 *   and later scans skip them, while a bitmap scan (the planner's pick when it expects few rows)
 *   rechecks every one of them in the table at every claim, and a sequential scan reads the whole
 *   outbox (published rows are kept for the retention): either way a claim cost more the longer
 *   writes went on (docs/benchmarks.md, "The relay's claim walks its index").
 * The claim and the mark are prepared statements planned once per connection: the transaction is
 * the event side's (inEventTransaction, src/events/statements.ts); the service's connections plan
 * every execution anew by default (reads differ by tenant), which cost these fixed-table
 * statements more than their execution.
 */
export const RELAY_TURN_SQL = `
  SELECT pg_try_advisory_xact_lock($1) AS held,
         set_config('synchronous_commit', 'off', true) AS commit_mode,
         set_config('enable_bitmapscan', 'off', true) AS bitmap_scans,
         set_config('enable_seqscan', 'off', true) AS sequential_scans`;

/** The oldest unpublished rows (the partial index on OUTBOX_ID), read by the relay holding the turn. */
export const RELAY_CLAIM_SQL = `
  SELECT o."OUTBOX_ID"::text AS "OUTBOX_ID", o."EVENT_TYPE", o."AGGREGATE_TYPE", o."AGGREGATE_ID",
         o."PAYLOAD"::text AS "PAYLOAD", o."TENANT_ID", o."CREATED_AT", o."PREVIOUS"::text AS "PREVIOUS"
    FROM "TB_ANAG_OUTBOX00" o
   WHERE o."PUBLISHED_AT" IS NULL
   ORDER BY o."OUTBOX_ID" -- the column (bigint), not the text it is answered as
   LIMIT $1`;

/** Outbox rows a prune looks at (and deletes at most) per round. */
const PRUNE_ROWS = 10_000;

/** The subscribers that have marks, read off the primary key one by one (a loose index scan). */
const SUBSCRIBERS_SQL = `
  WITH RECURSIVE s AS (
    (SELECT "SUBSCRIBER" FROM "TB_EVENT_CONSUMED" ORDER BY "SUBSCRIBER" LIMIT 1)
    UNION ALL
    SELECT (SELECT c."SUBSCRIBER" FROM "TB_EVENT_CONSUMED" c
             WHERE c."SUBSCRIBER" > s."SUBSCRIBER" ORDER BY c."SUBSCRIBER" LIMIT 1)
      FROM s WHERE s."SUBSCRIBER" IS NOT NULL)
  SELECT "SUBSCRIBER" FROM s WHERE "SUBSCRIBER" IS NOT NULL`;

/** The message of one outbox row: the body of decisions.md §8, PAYLOAD spliced in as stored. */
export function outboxRowToEvent(row: ClaimedRow, database?: string): BusEvent {
  const id = String(row.OUTBOX_ID);
  const createdAt = row.CREATED_AT instanceof Date ? row.CREATED_AT : new Date(row.CREATED_AT);
  const body =
    `{"OUTBOX_ID":${JSON.stringify(id)},"EVENT_TYPE":${JSON.stringify(row.EVENT_TYPE)},` +
    `"AGGREGATE_TYPE":${JSON.stringify(row.AGGREGATE_TYPE)},"AGGREGATE_ID":${JSON.stringify(row.AGGREGATE_ID)},` +
    `"PAYLOAD":${row.PAYLOAD},"CREATED_AT":${JSON.stringify(createdAt.toISOString())},` +
    `"TENANT_ID":${JSON.stringify(row.TENANT_ID)}${row.PREVIOUS ? `,"PREVIOUS":${row.PREVIOUS}` : ""}}`;
  return {
    id,
    type: row.EVENT_TYPE,
    tenantId: row.TENANT_ID,
    dimension: row.AGGREGATE_TYPE,
    timestamp: createdAt,
    body: Buffer.from(body, "utf8"),
    ...(database ? { database } : {}),
  };
}

export function createRelay(opts: RelayOptions): Relay {
  const { db, bus, logger } = opts;
  const backoffMs = opts.backoffMs ?? 250;
  const maxBackoffMs = opts.maxBackoffMs ?? 30_000;
  const gatherMs = opts.gatherMs ?? 0;
  let running = false;
  let loop: Promise<void> | null = null;
  let pending = true;
  /** Ends the current sleep when a wake-up comes (null while gathering: that waits them out). */
  let wakeUp: (() => void) | null = null;
  /** Ends the current sleep or gathering pause (stop). */
  let cutShort: (() => void) | null = null;
  let sleepTimer: NodeJS.Timeout | null = null;
  let unlisten: (() => Promise<void>) | null = null;
  let stopWatchingBus: (() => void) | null = null;
  let lastPrune = 0;

  /** One batch: claim, publish, mark. Resolves to how many rows were published. */
  async function publishBatch(): Promise<number> {
    // Refused before the claim: no transaction is opened for a publish that cannot be confirmed.
    if (!bus.isConnected()) throw new BusUnavailableError();
    return inEventTransaction(db, async (tx) => {
      // The turn and the claim leave together (one round trip): the claim runs after the turn
      // statement, so its snapshot follows the previous holder's commit; without the turn its rows
      // are dropped unread.
      const [turn, { rows }] = await Promise.all([
        tx.query<{ held: boolean }>(RELAY_TURN_SQL, [RELAY_TURN_LOCK], PREPARED),
        tx.query<ClaimedRow>(RELAY_CLAIM_SQL, [opts.batchSize], PREPARED),
      ]);
      if (turn.rows[0]?.held !== true || rows.length === 0) return 0;
      const events = rows.map((row) => outboxRowToEvent(row, opts.database));
      await bus.publish(events);
      opts.onPublished?.(events);
      // Nothing reads the mark's answer: on PostgreSQL it travels with COMMIT (one round trip);
      // should it fail, COMMIT rolls the batch back and the transaction fails (published again).
      await sendAtCommit(
        tx,
        `UPDATE "TB_ANAG_OUTBOX00" SET "PUBLISHED_AT" = now() WHERE "OUTBOX_ID" = ANY($1::bigint[])`,
        [rows.map((r) => String(r.OUTBOX_ID))],
      );
      return rows.length;
    });
  }

  /** The poll's question: one probe of the ("PUBLISHED_AT", "OUTBOX_ID") index. */
  async function anyUnpublished(): Promise<boolean> {
    const { rows } = await db.query<{ any: boolean }>(
      `SELECT EXISTS (SELECT 1 FROM "TB_ANAG_OUTBOX00" WHERE "PUBLISHED_AT" IS NULL) AS "any"`,
    );
    return rows[0]?.any === true;
  }

  /**
   * Deletes published rows older than the retention, at most PRUNE_ROWS a round, looking only at
   * the oldest PRUNE_ROWS rows (the primary key's order: the outbox's other indexes cover
   * unpublished rows only), then the subscribers' marks of messages older than the oldest row
   * kept: such a message can no longer be published again.
   */
  async function prune(): Promise<void> {
    if (opts.retentionMs <= 0 || Date.now() - lastPrune < 60_000) return;
    lastPrune = Date.now();
    await db.query(
      `DELETE FROM "TB_ANAG_OUTBOX00" WHERE "OUTBOX_ID" IN (
         SELECT "OUTBOX_ID" FROM (
           SELECT "OUTBOX_ID", "PUBLISHED_AT" FROM "TB_ANAG_OUTBOX00" ORDER BY "OUTBOX_ID" LIMIT $2) oldest
          WHERE "PUBLISHED_AT" < now() - $1::interval)`,
      [`${Math.floor(opts.retentionMs)} milliseconds`, PRUNE_ROWS],
    );
    const { rows } = await db.query<{ SUBSCRIBER: string }>(SUBSCRIBERS_SQL);
    if (rows.length === 0) return;
    await db.query(
      `DELETE FROM "TB_EVENT_CONSUMED"
        WHERE "SUBSCRIBER" = ANY($1::text[])
          AND "OUTBOX_ID" < (SELECT coalesce(min("OUTBOX_ID"), 0) FROM "TB_ANAG_OUTBOX00")`,
      [rows.map((r) => r.SUBSCRIBER)],
    );
  }

  /**
   * Waits `ms`, or less when stopped; `byWake` false: a wake-up does not end it (the gathering
   * pause, which is there to let the wake-ups' rows come).
   */
  function sleep(ms: number, byWake = true): Promise<void> {
    return new Promise<void>((resolve) => {
      cutShort = resolve;
      wakeUp = byWake ? resolve : null;
      sleepTimer = setTimeout(resolve, ms);
    }).then(() => {
      wakeUp = null;
      cutShort = null;
      if (sleepTimer) clearTimeout(sleepTimer);
      sleepTimer = null;
    });
  }

  /**
   * Waits until the bus has room for a batch (bus.whenRoom: the in-process bus's queues are
   * bounded; the events wait in the outbox meanwhile, not in memory). Resolves to false when the
   * relay is stopped meanwhile.
   */
  async function roomOnBus(): Promise<boolean> {
    const room = bus.whenRoom?.();
    if (!room) return running;
    let waited = false;
    const stopped = new Promise<void>((resolve) => {
      cutShort = resolve;
    });
    const timer = setTimeout(() => {
      waited = true;
      logger.info("event relay: subscribers in this process are behind; events wait in the outbox");
    }, 1000).unref();
    await Promise.race([room, stopped]);
    clearTimeout(timer);
    cutShort = null;
    if (waited && running) logger.info("event relay: subscribers caught up; publishing");
    return running;
  }

  async function run(): Promise<void> {
    let failures = 0;
    let streaming = false;
    let waitingForBus = false;
    let everConnected = false;
    let polled = false;
    while (running) {
      if (!pending) {
        await sleep(opts.pollMs);
        // The poll (unless a wake-up came meanwhile): look again, asking first.
        polled = !pending;
        pending = true;
        continue;
      }
      if (!bus.isConnected()) {
        // Woken when the connection is back (onConnect), or by the poll.
        if (!waitingForBus) {
          if (everConnected)
            logger.warn("event relay: the event bus is not connected; events wait in the outbox");
          else logger.info("event relay: waiting for the event bus to connect");
        }
        waitingForBus = true;
        await sleep(opts.pollMs);
        continue;
      }
      if (waitingForBus && everConnected)
        logger.info("event relay: the event bus is connected again; publishing");
      waitingForBus = false;
      everConnected = true;
      pending = false;
      try {
        if (polled) {
          polled = false;
          if (!(await anyUnpublished())) {
            await prune();
            continue;
          }
        }
        // Rows came a moment ago: let the ones being committed now join this claim.
        if (streaming && gatherMs > 0) {
          await sleep(gatherMs, false);
          if (!running) break;
        }
        if (!(await roomOnBus())) break;
        let published = await publishBatch();
        failures = 0;
        // A full batch means there may be more: go on without waiting for a NOTIFY.
        while (running && published >= opts.batchSize && (await roomOnBus()))
          published = await publishBatch();
        streaming = published > 0;
        if (published > 0) pending = true;
        await prune();
      } catch (err) {
        pending = true;
        // The connection dropped before the confirms came: wait for it to be back, not a backoff.
        if (!bus.isConnected()) continue;
        failures++;
        const wait = Math.min(maxBackoffMs, backoffMs * 2 ** Math.min(failures - 1, 16));
        logger.warn({ err, retry_in_ms: wait }, "event relay: publishing failed; retrying");
        if (running) await sleep(wait);
      }
    }
  }

  function wake() {
    pending = true;
    wakeUp?.();
  }

  return {
    async start() {
      if (running) return;
      running = true;
      stopWatchingBus = bus.onConnect(wake);
      unlisten = await db.listen(OUTBOX_CHANNEL, wake);
      loop = run();
    },
    wake,
    async drain() {
      let total = 0;
      for (;;) {
        const n = await publishBatch();
        total += n;
        if (n === 0) return total;
      }
    },
    async stop() {
      running = false;
      cutShort?.();
      stopWatchingBus?.();
      stopWatchingBus = null;
      await unlisten?.();
      unlisten = null;
      await loop;
      loop = null;
    },
  };
}
