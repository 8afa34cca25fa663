// A statement whose answer nobody needs before the transaction ends (an outbox row, a savepoint, a
// mark, a setting): on PostgreSQL it is deferred, so it travels with the next statement or with
// COMMIT instead of costing a round trip of its own; where the transaction cannot defer (PGlite),
// it is awaited now. Either way a failure of it fails the transaction.
import type { Queryable } from "../types.ts";

export async function awaitAtCommit(tx: Queryable, work: Promise<unknown>): Promise<void> {
  if (tx.defer) tx.defer(work);
  else await work;
}
