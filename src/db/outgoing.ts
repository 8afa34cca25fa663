// What leaves with a statement on a pooled PostgreSQL connection (issue 19): one wrapper of the
// connection's `query`, deciding per statement from the same two facts (is a transaction open on
// it, which plan mode its session is in) what is written with it.
//
// Writes of a transaction's turn. pg writes each statement to the socket as it is queued (a
// system call each). While the connection runs a transaction, it is corked until the current
// turn of the event loop ends, so the statements a turn queues leave in one write: BEGIN with the
// first statement, the outbox row with COMMIT. A lone statement goes out at once.
//
// Plan choice per statement and per transaction. The service's connections plan every execution
// of a prepared statement anew (plan_cache_mode=force_custom_plan): a read's best plan depends on
// its values (one tenant's city has ten customers, another's ten thousand). A statement whose
// best plan does not depend on its values (an INSERT … VALUES, a look-up by key) asks for a
// generic plan instead (QueryOptions.plan), and so does a transaction made of such statements (the
// event side's): planned once per connection and kept, which saves PostgreSQL the planning of
// every execution (a group of creates: about as long as its execution). The mode is a setting of
// the connection's session, changed only where no transaction is open (a SET there cannot be
// rolled back, so what this module remembers stays true): before a statement sent on its own
// that wants the other mode, and before a transaction's BEGIN when its statements want the other
// mode. A connection that keeps serving one kind switches nothing; a switch is one SET, written
// with what wants it.
import type { Writable } from "node:stream";
import type pg from "pg";
import type { PlanMode } from "../types.ts";
import { DescribedOnceQuery } from "./described-query.ts";

const SET_MODE: Record<PlanMode, string> = {
  custom: "SET plan_cache_mode = force_custom_plan",
  generic: "SET plan_cache_mode = force_generic_plan",
};

/**
 * The plan a statement asks for: every statement of the handle's with parameters
 * (DescribedOnceQuery, named or not: an unnamed one is planned through the plan cache too) custom
 * unless it asked for generic; null for one without parameters and for the handle's own plain
 * statements (BEGIN, COMMIT, pg_notify, scripts), whose plans nothing chooses between.
 */
function wantedPlan(query: unknown): PlanMode | null {
  return query instanceof DescribedOnceQuery && query.values?.length ? query.plan : null;
}

export interface Outgoing {
  /**
   * Wraps `client.query` (a new connection, in the mode its options set: custom): a
   * transaction's statements of one turn leave in one write; a statement sent outside a
   * transaction runs with the plan it asked for.
   */
  wrap(client: pg.PoolClient): void;
  /** Sets the session's mode to `plan` (when it is not) right before a transaction's BEGIN. */
  begin(client: pg.PoolClient, plan: PlanMode): void;
}

/** `inTransaction` holds the clients with a transaction open (the handle's own record). */
export function outgoing(inTransaction: WeakSet<pg.PoolClient>): Outgoing {
  const modes = new WeakMap<pg.PoolClient, PlanMode>();
  const modeOf = (client: pg.PoolClient): PlanMode => modes.get(client) ?? "custom";
  /** Sends the SET; its failure (the connection lost) is that of what follows it, which reports it. */
  const set = (send: (sql: string) => unknown, client: pg.PoolClient, plan: PlanMode) => {
    modes.set(client, plan);
    (send(SET_MODE[plan]) as Promise<unknown>).catch(() => {});
  };
  return {
    wrap(client) {
      const stream = (client as unknown as { connection: { stream: Writable } }).connection.stream;
      const query = client.query.bind(client) as (...args: unknown[]) => unknown;
      let corked = false;
      const uncork = () => {
        corked = false;
        stream.uncork();
      };
      (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args) => {
        if (inTransaction.has(client)) {
          if (!corked && stream.writable) {
            corked = true;
            stream.cork();
            setImmediate(uncork);
          }
          return query(...args);
        }
        const wanted = wantedPlan(args[0]);
        if (wanted === null || wanted === modeOf(client)) return query(...args);
        // The SET and the statement leave in one write.
        stream.cork();
        try {
          set(query, client, wanted);
          return query(...args);
        } finally {
          stream.uncork();
        }
      };
    },
    begin(client, plan) {
      // Written as the transaction's statements are: corked with its BEGIN.
      if (plan !== modeOf(client)) set((sql) => client.query(sql), client, plan);
    },
  };
}
