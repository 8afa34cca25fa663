// What leaves with a statement on one connection of the service's pool (issue 19), on pg's public
// API: the pool makes its connections as ServiceClient (pg-pool's documented `Client` option), a
// pg.Client whose socket comes from its `stream` option (so the pool knows it without reaching
// into pg) and whose `query` decides, per statement, what is written with it.
//
// Writes of a transaction's turn. pg writes each statement to the socket as it is queued (a
// system call each). While the connection runs a transaction of the handle's, its socket is
// corked until the current turn of the event loop ends, so the statements a turn queues leave in
// one write: BEGIN with the first statement, the outbox row with COMMIT. A lone statement goes
// out at once.
//
// Plan choice per statement and per transaction (session pool mode only). The service's
// connections plan every execution of a prepared statement anew (plan_cache_mode =
// force_custom_plan, src/db/pool.ts): a read's best plan depends on its values. A statement whose
// best plan does not depend on its values (an INSERT … VALUES, a look-up by key) asks for a
// generic plan instead (QueryOptions.plan), and so does a transaction made of such statements:
// planned once per connection and kept. The mode is a setting of the session, changed only where
// no transaction is open (what this class remembers stays true): before a statement sent on its
// own that wants the other mode, and before a transaction's BEGIN when its statements want it.
// Behind PgBouncer in transaction pooling mode a session setting would land on whichever server
// connection PgBouncer picks: no SET is sent, statements are unnamed (planned per execution).
//
// The watchdog (src/db/watchdog.ts) is told of every statement waiting for its answer, the
// statements of Prisma's adapter included (it runs on this pool), and of every socket, which it
// destroys when it declares the database down.
import { Socket } from "node:net";
import pg from "pg";
import type { PlanMode } from "../types.ts";
import { DescribedOnceQuery } from "./pg-internals.ts";

const SET_MODE: Record<PlanMode, string> = {
  custom: "SET plan_cache_mode = force_custom_plan",
  generic: "SET plan_cache_mode = force_generic_plan",
};

/**
 * The plan a statement asks for: every statement of the handle's with parameters
 * (DescribedOnceQuery, named or not: an unnamed one is planned through the plan cache too) custom
 * unless it asked for generic; null for one without parameters and for the handle's own plain
 * statements (BEGIN, COMMIT, pg_notify, scripts) and Prisma's, whose plans nothing chooses between.
 */
function wantedPlan(query: unknown): PlanMode | null {
  return query instanceof DescribedOnceQuery && query.values?.length ? query.plan : null;
}

/** What the pool's connections tell, and whether they switch plan modes. */
export interface ConnectionHooks {
  /** Session pool mode: plan modes are switched per statement and transaction (above). */
  planModes: boolean;
  /** A statement was sent: the returned function is called once it is answered (or failed). */
  waiting?: () => () => void;
  /** A connection's socket, made (the watchdog destroys it when the database is declared down). */
  socket?: (socket: Socket) => void;
}

type Callback = (err: Error | null, res?: unknown) => void;

/** The class pg-pool makes the service's connections with (PoolConfig.Client). */
export function serviceClientClass(hooks: ConnectionHooks) {
  return class ServiceClient extends pg.Client {
    /** This connection's socket (made by the `stream` option, so it is known without pg's internals). */
    readonly socket: Socket;
    /** A transaction of the handle's is open on it (src/db/transaction.ts sets it). */
    inTransaction = false;
    /** The session's plan mode (custom at first: the pool's startup options). */
    private plan: PlanMode = "custom";
    private corked = false;

    constructor(config?: string | pg.ClientConfig) {
      let socket: Socket | null = null;
      const base = typeof config === "string" ? { connectionString: config } : (config ?? {});
      super({ ...base, stream: () => (socket = new Socket()) } as pg.ClientConfig);
      // pg's Connection makes its stream in the constructor.
      this.socket = socket ?? new Socket();
      hooks.socket?.(this.socket);
    }

    /** Sets the session's mode to `plan` (when it is not) right before a transaction's BEGIN. */
    beforeBegin(plan: PlanMode): void {
      if (!hooks.planModes || plan === this.plan) return;
      // Written as the transaction's statements are: corked with its BEGIN.
      this.plan = plan;
      (this.query(SET_MODE[plan]) as Promise<unknown>).catch(() => {});
    }

    // biome-ignore lint/suspicious/noExplicitAny: pg's own overloads
    override query(...args: any[]): any {
      const answered = hooks.waiting?.();
      if (answered) {
        const last = args.length - 1;
        if (typeof args[last] === "function") {
          const callback = args[last] as Callback;
          args[last] = (err: Error | null, res?: unknown) => {
            answered();
            callback(err, res);
          };
        }
      }
      const result = this.send(args);
      if (answered && typeof args[args.length - 1] !== "function") {
        if (result && typeof (result as Promise<unknown>).then === "function")
          (result as Promise<unknown>).then(answered, answered);
        else answered(); // a query object without a callback (not used here): not tracked
      }
      return result;
    }

    // biome-ignore lint/suspicious/noExplicitAny: pg's own overloads
    private send(args: any[]): unknown {
      const query = super.query as (...a: unknown[]) => unknown;
      if (this.inTransaction) {
        if (!this.corked && this.socket.writable) {
          this.corked = true;
          this.socket.cork();
          setImmediate(() => {
            this.corked = false;
            this.socket.uncork();
          });
        }
        return query.apply(this, args);
      }
      const wanted = hooks.planModes ? wantedPlan(args[0]) : null;
      if (wanted === null || wanted === this.plan) return query.apply(this, args);
      // The SET and the statement leave in one write.
      this.socket.cork();
      try {
        this.setMode(wanted);
        return query.apply(this, args);
      } finally {
        this.socket.uncork();
      }
    }

    /** Sends the SET; its failure (the connection lost) is that of what follows it, which reports it. */
    private setMode(plan: PlanMode): void {
      this.plan = plan;
      (super.query(SET_MODE[plan]) as Promise<unknown>).catch(() => {});
    }
  };
}

export type ServiceClient = InstanceType<ReturnType<typeof serviceClientClass>>;
