// Deduplication on the message id (decisions.md §8: delivery is at least once). A subscriber's
// effect and the record that it has processed the message commit in one transaction, so a
// message delivered twice has its effect once.
import type { Database, Queryable } from "../types.ts";
import type { ReceivedEvent } from "./bus.ts";
import { EVENT_STATEMENTS } from "./outbox.ts";

/** For the rest of the transaction: prepared statements keep one plan (fixed tables, no tenant skew). */
export const GENERIC_PLANS = "SELECT set_config('plan_cache_mode', 'force_generic_plan', true)";

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
  await db.transaction(async (tx) => {
    // Generic plans for the marks and the effect (prepared: EVENT_STATEMENTS), as the relay's
    // (src/events/relay.ts, RELAY_TURN_SQL); sent with BEGIN and the marks, not waited for.
    const generic = tx.query(GENERIC_PLANS);
    if (tx.defer) tx.defer(generic);
    else await generic;
    const { rows } = await tx.query<{ OUTBOX_ID: string }>(
      `INSERT INTO "TB_EVENT_CONSUMED" ("SUBSCRIBER", "OUTBOX_ID")
       SELECT $1, id FROM unnest($2::bigint[]) AS id
       ON CONFLICT DO NOTHING RETURNING "OUTBOX_ID"::text AS "OUTBOX_ID"`,
      [subscriber, [...new Set(events.map((e) => e.id))]],
      { prepare: EVENT_STATEMENTS },
    );
    const marked = new Set(rows.map((r) => r.OUTBOX_ID));
    const fresh = events.filter((e) => marked.delete(e.id));
    if (fresh.length > 0) await effect(tx, fresh);
  });
}
