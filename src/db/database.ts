// The Database seam: parameterised SQL and transactions over PostgreSQL (pg) or the embedded
// PGlite. Both run the same SQL; result types are normalised the same way (int8 and numeric as
// JS numbers, so that INTEGER and DECIMAL fields come back as JSON numbers).
//
// This module is the data layer's public face; each job has a module of its own:
//   handle.ts       the DatabaseHandle type and its open options
//   pool.ts         the service's one pg.Pool (its options, statements sent on their own)
//   connection.ts   what leaves with a statement on a connection (corked turns, plan modes)
//   statements.ts   sending a statement; the one hook around each (deadline, watchdog, observer)
//   transaction.ts  a transaction: its connection lease and its phases, as small state machines
//   watchdog.ts     probes a silent database; gives the pool's connections up when it is down
//   listen.ts       LISTEN/NOTIFY on one connection (DATABASE_LISTEN_URL behind PgBouncer)
//   notify.ts       the NOTIFYs of committed writes, folded
//   postgres.ts     openPostgres: the above put together
//   pglite.ts       openPglite: the embedded database and its data-dir lock
//   pg-internals.ts the one reach into pg's private internals (pg pinned exactly)
export {
  DEFAULT_CONNECT_TIMEOUT_MS,
  DEFAULT_STATEMENT_TIMEOUT_MS,
  type DatabaseHandle,
  type OpenOptions,
  type ScriptRunner,
  type StatementObserver,
  type TxQueryable,
} from "./handle.ts";
export { NOTIFY_FOLD_MS, NOTIFY_OWED_MS } from "./notify.ts";
export { DatabaseInUseError, openPglite, PGLITE_SETTINGS } from "./pglite.ts";
export { openPostgres } from "./postgres.ts";
