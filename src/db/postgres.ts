// A DatabaseHandle on PostgreSQL: the service's pool (src/db/pool.ts), its watchdog
// (src/db/watchdog.ts), its statements (src/db/statements.ts), transactions
// (src/db/transaction.ts), the listening connection (src/db/listen.ts) and the notifier of
// committed writes (src/db/notify.ts), put together.
import { Socket } from "node:net";
import pg from "pg";
import {
  DEFAULT_STATEMENT_TIMEOUT_MS,
  type DatabaseHandle,
  type OpenOptions,
  type TxQueryable,
} from "./handle.ts";
import { CAUGHT_UP_TIMEOUT_MS, listeningConnection } from "./listen.ts";
import { committedNotifier } from "./notify.ts";
import { createPool } from "./pool.ts";
import { hooked, pgQueryable } from "./statements.ts";
import { runTransaction } from "./transaction.ts";
import { createWatchdog, DEFAULT_WATCHDOG_MS, type ProbeAttempt, type Watchdog } from "./watchdog.ts";

/**
 * The watchdog's probe: `SELECT 1` on a connection of its own (the pool's may all be stuck). The
 * watchdog times it (its connection, then its answer from when the statement is sent) and gives it
 * up through `attempt.signal`: no timer of its own, which a lagging event loop would fire early.
 */
async function probeFresh(connectionString: string, attempt: ProbeAttempt): Promise<void> {
  let socket: Socket | null = null;
  const client = new pg.Client({
    connectionString,
    application_name: "dimensio-watchdog",
    stream: () => (socket = new Socket()),
  } as pg.ClientConfig);
  client.on("error", () => {}); // the probe's outcome is its promise
  const giveUp = () => socket?.destroy();
  attempt.signal.addEventListener("abort", giveUp, { once: true });
  try {
    await client.connect();
    const answer = client.query("SELECT 1");
    attempt.sent();
    await answer;
  } finally {
    attempt.signal.removeEventListener("abort", giveUp);
    client.end().catch(() => {});
  }
}

/**
 * A long statement on a connection of its own (DatabaseHandle.maintenance), with its own
 * statement timeout. Through PgBouncer (no direct URL) the timeout cannot be a connection setting
 * (PgBouncer refuses it): the role's applies.
 */
async function runMaintenance(
  connectionString: string,
  sql: string,
  settings: { timeoutMs: number; connectTimeoutMs: number | undefined; asSetting: boolean },
): Promise<void> {
  const client = new pg.Client({
    connectionString,
    application_name: "dimensio-maintenance",
    connectionTimeoutMillis: settings.connectTimeoutMs,
    ...(settings.asSetting ? { statement_timeout: settings.timeoutMs } : {}),
  });
  client.on("error", () => {}); // the statement's outcome is its promise
  try {
    await client.connect();
    await client.query(sql);
  } finally {
    await client.end().catch(() => {});
  }
}

export function openPostgres(connectionString: string, opts: OpenOptions = {}): DatabaseHandle {
  const statementTimeoutMs = opts.statementTimeoutMs ?? DEFAULT_STATEMENT_TIMEOUT_MS;
  const transactionTimeoutMs = opts.transactionTimeoutMs ?? statementTimeoutMs;
  const poolMode = opts.poolMode ?? "session";
  const onConnectionError = opts.onConnectionError ?? (() => {});
  const watchdogMs = opts.watchdogMs ?? DEFAULT_WATCHDOG_MS;
  const watchdog: Watchdog | null =
    watchdogMs > 0
      ? createWatchdog({
          boundMs: watchdogMs,
          probe: (attempt) => probeFresh(connectionString, attempt),
          onDown: (reason) => opts.onWatchdog?.({ state: "down", reason }),
          onUp: () => opts.onWatchdog?.({ state: "up" }),
        })
      : null;
  // While the watchdog holds the database down, statements are refused at once (503).
  const check = watchdog ? () => watchdog.check() : undefined;
  const pool = createPool(connectionString, {
    max: opts.max ?? 10,
    statementTimeoutMs,
    connectTimeoutMs: opts.connectTimeoutMs,
    poolMode,
    gate: check,
    hooks: watchdog ? { waiting: () => watchdog.waiting(), socket: (s) => watchdog.adopt(s) } : {},
  });
  // An idle client that loses its connection must not crash the process (the pool drops it).
  pool.on("error", (err) => onConnectionError(err, "idle"));
  // Behind PgBouncer, LISTEN goes to the server directly: a session of its own.
  const listenPool = opts.listenUrl
    ? new pg.Pool({
        connectionString: opts.listenUrl,
        max: 2,
        application_name: "dimensio",
        connectionTimeoutMillis: opts.connectTimeoutMs ?? pool.options.connectionTimeoutMillis,
        keepAlive: true,
        keepAliveInitialDelayMillis: 10_000,
      })
    : null;
  listenPool?.on("error", (err) => onConnectionError(err, "listening"));
  const named = poolMode === "session";
  const base: TxQueryable = hooked(pgQueryable(pool, named), { check, onStatement: opts.onStatement });
  const listening = listeningConnection(listenPool ?? pool, pool, (err) =>
    onConnectionError(err, "listening"),
  );
  const notifier = committedNotifier(pool, listening.tell);
  const txContext = {
    pool,
    named,
    notifier,
    onStatement: opts.onStatement,
    transactionTimeoutMs,
    onConnectionError: (err: Error) => onConnectionError(err, "transaction"),
  };
  let closing: Promise<void> | null = null;
  return {
    kind: "postgres",
    pool,
    connectionString,
    query: base.query,
    exec: base.exec,
    transaction(fn, txOpts) {
      try {
        watchdog?.check();
      } catch (err) {
        return Promise.reject(err);
      }
      return runTransaction(txContext, fn, txOpts);
    },
    listen: (channel, onPayload, o) =>
      listening.listen(channel, {
        onPayload,
        onLost: o?.onLost ?? (() => {}),
        onBack: o?.onBack ?? (() => {}),
      }),
    listenersCaughtUp: (timeoutMs = CAUGHT_UP_TIMEOUT_MS) => listening.caughtUp(timeoutMs),
    maintenance(sql, timeoutMs) {
      try {
        watchdog?.check();
      } catch (err) {
        return Promise.reject(err);
      }
      return runMaintenance(opts.listenUrl ?? connectionString, sql, {
        timeoutMs,
        connectTimeoutMs: opts.connectTimeoutMs,
        asSetting: opts.listenUrl !== undefined || poolMode === "session",
      });
    },
    close() {
      // The pool ends only when every client is back: listening clients are returned first.
      closing ??= (async () => {
        watchdog?.stop();
        notifier.stop();
        await listening.close();
        await listenPool?.end();
        await pool.end();
      })();
      return closing;
    },
  };
}
