// Deduplication on the message id (decisions.md §8: delivery is at least once). A subscriber's
// effect and the record that it has processed the message commit in one transaction, so a
// message delivered twice has its effect once.
import type { Database, Queryable } from "../types.ts";
import type { ReceivedEvent } from "./bus.ts";
import { inEventTransaction, PREPARED } from "./statements.ts";

/**
 * Marks every message of a batch in one statement and runs `effect` with those this subscriber
 * had not processed yet (in the batch's order), in one transaction with the marks.
 */
export async function processEachOnce<E extends Pick<ReceivedEvent, "id">>(
  db: Database,
  subscriber: string,
  events: readonly E[],
  effect: (tx: Queryable, fresh: E[]) => Promise<void>,
): Promise<void> {
  await inEventTransaction(db, async (tx) => {
    const { rows } = await tx.query<{ OUTBOX_ID: string }>(
      `INSERT INTO "TB_EVENT_CONSUMED" ("SUBSCRIBER", "OUTBOX_ID")
       SELECT $1, id FROM unnest($2::bigint[]) AS id
       ON CONFLICT DO NOTHING RETURNING "OUTBOX_ID"::text AS "OUTBOX_ID"`,
      [subscriber, [...new Set(events.map((e) => e.id))]],
      PREPARED,
    );
    const marked = new Set(rows.map((r) => r.OUTBOX_ID));
    const fresh = events.filter((e) => marked.delete(e.id));
    if (fresh.length > 0) await effect(tx, fresh);
  });
}
