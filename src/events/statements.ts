// How the event side runs its statements (docs/decisions.md "The event side plans its statements
// once"): prepared under one namespace, since they read and write fixed tables, which change only
// with a migration, never with the metadata; and, in the event side's transactions, with generic
// plans (planned once per connection: no tenant skew there), where the service's connections plan
// every execution anew for the sake of reads.
import { awaitAtCommit } from "../db/deferred.ts";
import type { Database, Queryable } from "../types.ts";

/** Query options of an event-side statement: prepared, in the event side's namespace. */
export const PREPARED = { prepare: "events" } as const;

/**
 * Sends an event-side statement whose answer nobody reads: prepared, and on PostgreSQL deferred to
 * travel with COMMIT (src/db/deferred.ts); a failure of it fails the transaction.
 */
export function sendAtCommit(tx: Queryable, sql: string, params: readonly unknown[]): Promise<void> {
  return awaitAtCommit(tx, tx.query(sql, params, PREPARED));
}

/**
 * A transaction of the event side: its prepared statements keep one plan (set for the transaction
 * only, sent with BEGIN and its first statement). The relay's turn statement sets the same with its
 * other settings (src/events/relay.ts, RELAY_TURN_SQL).
 */
export function inEventTransaction<T>(db: Database, fn: (tx: Queryable) => Promise<T>): Promise<T> {
  return db.transaction(async (tx) => {
    await awaitAtCommit(tx, tx.query("SELECT set_config('plan_cache_mode', 'force_generic_plan', true)"));
    return fn(tx);
  });
}
