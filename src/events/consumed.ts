// Deduplication on the message id (decisions.md §8: delivery is at least once). A subscriber's
// effect and the record that it has processed the message commit in one transaction, so a
// message delivered twice has its effect once.
import type { Database, Queryable } from "../types.ts";
import type { ReceivedEvent } from "./bus.ts";

/**
 * Runs `effect` for a message this subscriber has not processed yet, in one transaction with the
 * mark; returns false (and runs nothing) for a message it has processed already.
 */
export async function processOnce(
  db: Database,
  subscriber: string,
  messageId: string,
  effect: (tx: Queryable) => Promise<void>,
): Promise<boolean> {
  return db.transaction(async (tx) => {
    const { rows } = await tx.query(
      `INSERT INTO "TB_EVENT_CONSUMED" ("SUBSCRIBER", "OUTBOX_ID") VALUES ($1, $2::bigint)
       ON CONFLICT DO NOTHING RETURNING 1 AS "NEW"`,
      [subscriber, messageId],
    );
    if (rows.length === 0) return false;
    await effect(tx);
    return true;
  });
}

/**
 * The batch form: marks every message of the batch in one statement and runs `effect` with those
 * this subscriber had not processed yet (in the batch's order), in one transaction with the marks.
 */
export async function processEachOnce(
  db: Database,
  subscriber: string,
  events: readonly ReceivedEvent[],
  effect: (tx: Queryable, fresh: ReceivedEvent[]) => Promise<void>,
): Promise<void> {
  await db.transaction(async (tx) => {
    const { rows } = await tx.query<{ OUTBOX_ID: string }>(
      `INSERT INTO "TB_EVENT_CONSUMED" ("SUBSCRIBER", "OUTBOX_ID")
       SELECT $1, id FROM unnest($2::bigint[]) AS id
       ON CONFLICT DO NOTHING RETURNING "OUTBOX_ID"::text AS "OUTBOX_ID"`,
      [subscriber, [...new Set(events.map((e) => e.id))]],
    );
    const marked = new Set(rows.map((r) => r.OUTBOX_ID));
    const fresh = events.filter((e) => marked.delete(e.id));
    if (fresh.length > 0) await effect(tx, fresh);
  });
}
