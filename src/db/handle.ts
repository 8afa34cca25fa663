// What a caller of the data layer sees (re-exported by src/db/database.ts): the handle of a
// database, PostgreSQL or the embedded PGlite, and the options it is opened with.
import type { PGlite } from "@electric-sql/pglite";
import type pg from "pg";
import type { Database, Queryable, TransactionOptions } from "../types.ts";

/** Runs a multi-statement script (migrations). */
export interface ScriptRunner {
  exec(sql: string): Promise<void>;
}

export type TxQueryable = Queryable & ScriptRunner;

interface HandleBase extends Omit<Database, "transaction">, ScriptRunner {
  transaction<T>(fn: (tx: TxQueryable) => Promise<T>, opts?: TransactionOptions): Promise<T>;
  /**
   * One statement outside any transaction that may run long (CREATE INDEX CONCURRENTLY of a large
   * table): on PostgreSQL on a connection of its own, direct (`listenUrl`, behind PgBouncer), with
   * `timeoutMs` as its statement timeout instead of the pool's (0: none); on PGlite a statement
   * as any other.
   */
  maintenance(sql: string, timeoutMs: number): Promise<void>;
}

export type DatabaseHandle = HandleBase &
  (
    | { readonly kind: "pglite"; readonly pglite: PGlite }
    | {
        readonly kind: "postgres";
        /**
         * The service's one pool (src/db/pool.ts): Prisma's driver adapter runs on it too
         * (src/db/prisma.ts). While the watchdog holds the database down it hands out no
         * connection (DatabaseNotAnsweringError at once).
         */
        readonly pool: pg.Pool;
        readonly connectionString: string;
      }
  );

/** Told the text of a statement sent, and whether it went out behind another one (pipelined). */
export type StatementObserver = (text: string, how: { pipelined: boolean }) => void;

/** Spec 8: a query is cancelled after 30 s (answered 504 QUERY_TIMEOUT). */
export const DEFAULT_STATEMENT_TIMEOUT_MS = 30_000;

/** A request waits at most this long for a database connection (then 503 DATABASE_UNAVAILABLE). */
export const DEFAULT_CONNECT_TIMEOUT_MS = 5000;

export interface OpenOptions {
  /** PostgreSQL: the pool size (Prisma's statements take their connections from it too). */
  max?: number;
  /** PostgreSQL: each statement is cancelled after this long (SQLSTATE 57014). */
  statementTimeoutMs?: number;
  /**
   * Every transaction (writes as reads) ends with 504 QUERY_TIMEOUT once it has run this long:
   * checked before each statement, so a request of many short statements cannot hold a
   * connection (or, on PGlite, the whole database) for longer. Defaults to the statement timeout.
   */
  transactionTimeoutMs?: number;
  /**
   * Told the text of every statement sent for the service's work (BEGIN and COMMIT included;
   * LISTEN connections not), and whether it went out behind another one without waiting for its
   * answer (pipelined: no round trip of its own). What tests count round trips with.
   */
  onStatement?: StatementObserver;
  /**
   * PostgreSQL: how long a request waits for a connection (a new one, or a free one of the pool)
   * before it fails as DATABASE_UNAVAILABLE (503), so that a database that is away never makes a
   * request hang. Defaults to DEFAULT_CONNECT_TIMEOUT_MS.
   */
  connectTimeoutMs?: number;
  /**
   * PostgreSQL: told of every connection the database broke off: an idle one of the pool, the
   * listening connection, or one a transaction holds (told once; its statements fail on their
   * own). The service logs them; none reaches the process as an unhandled 'error' event.
   */
  onConnectionError?: (err: Error, which: "idle" | "listening" | "transaction") => void;
  /**
   * PostgreSQL: a statement unanswered this long makes the watchdog probe the server on a fresh
   * connection; no answer within as long again declares the database down (src/db/watchdog.ts).
   * 0 turns it off. Defaults to DEFAULT_WATCHDOG_MS.
   */
  watchdogMs?: number;
  /**
   * PostgreSQL: `transaction` behind PgBouncer in transaction pooling mode: no session state is
   * relied on across transactions: statements unnamed, no session settings, no startup options
   * (src/db/pool.ts). Default `session`.
   */
  poolMode?: "session" | "transaction";
  /** PostgreSQL: where the LISTEN connection goes (direct, not through PgBouncer). Default: the pool's. */
  listenUrl?: string;
  /** Told when the watchdog declares the database down (why), and when it answers again. */
  onWatchdog?: (event: { state: "down"; reason: string } | { state: "up" }) => void;
}
