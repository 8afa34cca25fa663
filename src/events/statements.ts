// How the event side runs its statements (docs/decisions.md "The event side plans its statements
// once"): prepared under one namespace, since they read and write fixed tables, which change only
// with a migration, never with the metadata; and, in the event side's transactions, with generic
// plans (planned once per connection: no tenant skew there; src/db/connection.ts), where the
// service's connections plan every execution anew for the sake of reads.
import { awaitAtCommit } from "../db/deferred.ts";
import type { Database, Queryable, QueryOptions, TransactionOptions } from "../types.ts";

/**
 * Query options of an event-side statement: prepared, in the event side's namespace, with a
 * generic plan when sent on its own (the webhook dispatcher's; in a transaction, the transaction's
 * plan applies: EVENT_TRANSACTION).
 */
export const PREPARED: QueryOptions = { prepare: "events", plan: "generic" };

/**
 * Sends an event-side statement whose answer nobody reads: prepared, and on PostgreSQL deferred to
 * travel with COMMIT (src/db/deferred.ts); a failure of it fails the transaction.
 */
export function sendAtCommit(tx: Queryable, sql: string, params: readonly unknown[]): Promise<void> {
  return awaitAtCommit(tx, tx.query(sql, params, PREPARED));
}

/** How the event side's transactions run: their prepared statements keep one plan per connection. */
export const EVENT_TRANSACTION: TransactionOptions = { plan: "generic" };

/** A transaction of the event side (EVENT_TRANSACTION). */
export function inEventTransaction<T>(db: Database, fn: (tx: Queryable) => Promise<T>): Promise<T> {
  return db.transaction(fn, EVENT_TRANSACTION);
}
