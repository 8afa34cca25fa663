// Deduplication on the message id (decisions.md §8: delivery is at least once). A subscriber's
// effect and the record that it has processed the message commit in one transaction, so a
// message delivered twice has its effect once.
import type { Database, Queryable } from "../types.ts";

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
