// The Database seam: parameterised SQL and transactions over PostgreSQL (pg) or the embedded
// PGlite. Both run the same SQL; result types are normalised the same way (int8 and numeric as
// JS numbers, so that INTEGER and DECIMAL fields come back as JSON numbers).
import { createHash, randomUUID } from "node:crypto";
import { readFile, rm, writeFile } from "node:fs/promises";
// PGlite itself is imported by openPglite: a service on PostgreSQL does not load it.
import type { PGlite } from "@electric-sql/pglite";
import pg from "pg";
import { TransactionTimeoutError } from "../errors.ts";
import type { Database, Queryable, QueryOptions, QueryResult, TransactionOptions } from "../types.ts";
import { type DescribedQueryConfig, DescribedOnceQuery } from "./described-query.ts";
import { answeredByServer } from "./errors.ts";
import { outgoing } from "./outgoing.ts";
import { addNoticeItems, type NoticeItems, noticeItemsOf, noticePayload } from "./notice.ts";
import { createWatchdog, DEFAULT_WATCHDOG_MS, type ProbeAttempt, type Watchdog } from "./watchdog.ts";

const INT8 = 20;
const NUMERIC = 1700;
const TIMESTAMPTZ = 1184;

function parseBigintish(v: string): number | string {
  const n = Number(v);
  return Number.isSafeInteger(n) ? n : v;
}

const parseNumeric = (v: string): number => Number(v);

/** Runs a multi-statement script (migrations). */
export interface ScriptRunner {
  exec(sql: string): Promise<void>;
}

export type TxQueryable = Queryable & ScriptRunner;

interface HandleBase extends Omit<Database, "transaction">, ScriptRunner {
  transaction<T>(fn: (tx: TxQueryable) => Promise<T>, opts?: TransactionOptions): Promise<T>;
}

export type DatabaseHandle = HandleBase &
  (
    | { readonly kind: "pglite"; readonly pglite: PGlite }
    | {
        readonly kind: "postgres";
        readonly pool: pg.Pool;
        readonly connectionString: string;
        /**
         * Puts another pool of the same database (Prisma's) under this handle's watchdog: its
         * statements are watched, its connections given up with the pool's when the database is
         * declared down, and it hands out none meanwhile (503 at once).
         */
        watchPool(other: pg.Pool): void;
      }
  );

/** Spec 8: a query is cancelled after 30 s (answered 504 QUERY_TIMEOUT). */
export const DEFAULT_STATEMENT_TIMEOUT_MS = 30_000;

export interface OpenOptions {
  /** PostgreSQL: the pool size. */
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
   * relied on across transactions (statements unnamed, no session settings). Default `session`.
   */
  poolMode?: "session" | "transaction";
  /** PostgreSQL: where the LISTEN connection goes (direct, not through PgBouncer). Default: the pool's. */
  listenUrl?: string;
  /** Told when the watchdog declares the database down (why), and when it answers again. */
  onWatchdog?: (event: { state: "down"; reason: string } | { state: "up" }) => void;
}

/** A request waits at most this long for a database connection (then 503 DATABASE_UNAVAILABLE). */
export const DEFAULT_CONNECT_TIMEOUT_MS = 5000;

/** How long past the statement timeout pg waits for an answer before it gives the connection up. */
const QUERY_TIMEOUT_GRACE_MS = 5000;

export type StatementObserver = (text: string, how: { pipelined: boolean }) => void;

/**
 * `q` with `before` called before each statement given to it (query, exec, and lastStatement when
 * it has one; `sql` null for lastStatement, whose text is chosen as it is sent): what a wrapper
 * adds to every statement (telling, a deadline, a lazy BEGIN) in one place. A throw from `before`
 * is thrown as the statement's.
 */
function aroundEachStatement(q: TxQueryable, before: (sql: string | null) => void): TxQueryable {
  const last = q.lastStatement?.bind(q);
  return {
    ...q,
    query(text, params, opts) {
      before(text);
      return q.query(text, params, opts);
    },
    exec(sql) {
      before(sql);
      return q.exec(sql);
    },
    ...(last
      ? {
          lastStatement(notice, text, params, opts) {
            before(null);
            return last(notice, text, params, opts);
          },
        }
      : {}),
  };
}

/** The statements of `q`, each told to `onStatement` first. */
function observed(q: TxQueryable, onStatement?: StatementObserver, pipelined = () => false): TxQueryable {
  if (!onStatement) return q;
  // lastStatement (never on what this wraps) tells its own text.
  return aroundEachStatement(q, (sql) => {
    if (sql !== null) onStatement(sql, { pipelined: pipelined() });
  });
}

/** Work a transaction awaits at its end (Queryable.defer); failures surface there. */
function deferredWork() {
  const pending: Promise<unknown>[] = [];
  return {
    defer(work: Promise<unknown>) {
      work.catch(() => {});
      pending.push(work);
    },
    all: () => Promise.all(pending),
  };
}

/** The longest a NOTIFY of a committed transaction waits to be folded with the next ones. */
export const NOTIFY_FOLD_MS = 5;

/**
 * The longest a NOTIFY owed to folded commits waits for a committing transaction to carry it
 * before it goes out as a statement of its own (a transaction of its own).
 */
export const NOTIFY_OWED_MS = 50;

/**
 * Wakes the listeners of committed transactions' channels: this process's own at once (no round
 * trip), other processes' through NOTIFY, at most one per channel every NOTIFY_FOLD_MS: each NOTIFY
 * wakes every listening connection of the database, so one per commit would cost PostgreSQL more
 * than the writes that asked for them. A NOTIFY goes inside a committing transaction, pipelined
 * with its COMMIT (no transaction of its own), when none went out in the last NOTIFY_FOLD_MS.
 * Commits in between are owed one: the next committing transaction carries it, or, when none
 * comes within NOTIFY_OWED_MS, a statement of its own. A NOTIFY's payload names the items of every
 * commit it covers (src/db/notice.ts): its own transaction's and those folded into it.
 */
function committedNotifier(pool: pg.Pool, tellLocal: (channel: string, payload: string) => void) {
  interface Window {
    timer: NodeJS.Timeout;
    /** The items of the commits in the window: a NOTIFY naming them is owed once it ends. */
    again: NoticeItems | null;
    /** The window ended owing one: the next commit carries it. */
    owed: boolean;
  }
  const windows = new Map<string, Window>();
  const schedule = (channel: string, w: Window, ms: number) => {
    w.timer = setTimeout(() => end(channel, w), ms);
    w.timer.unref();
  };
  /**
   * A NOTIFY of `channel` goes out now: the next NOTIFY_FOLD_MS are folded into the next one.
   * Answers the items of the commits folded into the window it ends (the NOTIFY names them).
   */
  const open = (channel: string): NoticeItems | null => {
    const old = windows.get(channel);
    if (old) clearTimeout(old.timer);
    const w: Window = { timer: undefined as unknown as NodeJS.Timeout, again: null, owed: false };
    schedule(channel, w, NOTIFY_FOLD_MS);
    windows.set(channel, w);
    return old?.again ?? null;
  };
  const send = (channel: string, items: NoticeItems | null) => {
    const payload = noticePayload(addNoticeItems(open(channel), items) ?? "all");
    pool.query("SELECT pg_notify($1, $2)", [channel, payload]).catch(() => {}); // the relays' poll covers a lost one
  };
  function end(channel: string, w: Window) {
    if (w.owed) return send(channel, null); // no commit carried it
    if (!w.again) {
      windows.delete(channel);
      return;
    }
    w.owed = true;
    schedule(channel, w, NOTIFY_OWED_MS);
  }
  return {
    /**
     * Before a transaction that changed `items` commits: what the NOTIFY of `channel` that is to
     * go out with it names (none went out in the last NOTIFY_FOLD_MS, or one is owed): its items
     * and those of the commits folded into it. Null when the current window's end will see to it.
     */
    claim(channel: string, items: NoticeItems): NoticeItems | null {
      const w = windows.get(channel);
      if (w && !w.owed) {
        w.again = addNoticeItems(w.again, items);
        return null;
      }
      return addNoticeItems(open(channel), items) ?? "all";
    },
    /** A transaction that claimed `named` of `channel` rolled back: they go out on their own. */
    unclaim(channel: string, named: NoticeItems) {
      send(channel, named);
    },
    /** After the commit of a transaction that changed `items`: this process's listeners. */
    committed(channel: string, items: NoticeItems) {
      tellLocal(channel, noticePayload(items));
    },
    stop() {
      for (const w of windows.values()) clearTimeout(w.timer);
      windows.clear();
    },
  };
}

/** The transaction's statements, refused once its deadline has passed. */
function withDeadline(tx: TxQueryable, timeoutMs: number): TxQueryable {
  const deadline = Date.now() + timeoutMs;
  return aroundEachStatement(tx, () => {
    if (Date.now() > deadline) throw new TransactionTimeoutError(timeoutMs);
  });
}

// ---------------------------------------------------------------- PostgreSQL

const pgTypes = {
  getTypeParser(oid: number, format?: "text" | "binary") {
    if (oid === INT8) return parseBigintish;
    if (oid === NUMERIC) return parseNumeric;
    // biome-ignore lint/suspicious/noExplicitAny: pg's own overloads
    return (pg.types.getTypeParser as any)(oid, format);
  },
};

/** Statement names per namespace, by SQL text (a text's hash is kept by the string itself). */
const statementNames = new Map<string | number, Map<string, string>>();
/** How many names statementNames holds: past 5,000 it starts again (odd SQL cannot grow it forever). */
let statementNameCount = 0;

/** A stable statement name for (namespace, SQL text). */
function statementName(namespace: string | number, text: string): string {
  let names = statementNames.get(namespace);
  const known = names?.get(text);
  if (known) return known;
  if (statementNameCount >= 5000) {
    statementNames.clear();
    statementNameCount = 0;
    names = undefined;
  }
  if (!names) {
    names = new Map();
    statementNames.set(namespace, names);
  }
  const name = `d${namespace}_${createHash("sha1").update(text).digest("hex").slice(0, 20)}`;
  names.set(text, name);
  statementNameCount++;
  return name;
}

/** pg's `query` given a Submittable and a callback (Client and Pool alike). */
type SendSubmittable = (
  query: DescribedOnceQuery,
  values: undefined,
  callback: (err: Error | null, res: pg.QueryResult) => void,
) => unknown;

/** A statement through DescribedOnceQuery (prepared: its row description asked once per connection). */
function sendQuery(client: pg.Pool | pg.PoolClient, config: DescribedQueryConfig): Promise<pg.QueryResult> {
  return new Promise((resolve, reject) => {
    (client.query as unknown as SendSubmittable).call(
      client,
      new DescribedOnceQuery(config),
      undefined,
      (err, res) => (err ? reject(err) : resolve(res)),
    );
  });
}

function pgQueryable(client: pg.Pool | pg.PoolClient): Queryable & ScriptRunner {
  return {
    async query<R>(
      text: string,
      params: readonly unknown[] = [],
      opts?: QueryOptions,
    ): Promise<QueryResult<R>> {
      const name = opts?.prepare === undefined ? undefined : statementName(opts.prepare, text);
      const res = await sendQuery(client, {
        text,
        values: params as unknown[],
        types: pgTypes,
        name,
        plan: name === undefined ? undefined : opts?.plan,
      });
      return { rows: res.rows as R[], rowCount: res.rowCount ?? res.rows.length };
    },
    async exec(sql: string) {
      await client.query(sql);
    },
  };
}

/** A transaction's connection and its statements, once the pool gave it. */
interface Held {
  client: pg.PoolClient;
  raw: Queryable & ScriptRunner;
}

/** The longest wait between two attempts to re-establish a lost listening connection. */
const MAX_RELISTEN_DELAY_MS = 5000;

interface ChannelListener {
  onPayload: (payload: string) => void;
  onLost: () => void;
  onBack: () => void;
}

/**
 * The channel of `listenersCaughtUp`: its probes ("w:<token>") and each listening connection's
 * answer to one ("a:<token>", sent from that connection, so the notice names its backend).
 */
const CAUGHT_UP_CHANNEL = "dimensio_caught_up";
/** The application_name of every listening connection: pg_stat_activity names the ones to wait for. */
const LISTENING_APPLICATION = "dimensio listening";
/** How long `listenersCaughtUp` waits for a listening connection that does not answer. */
const CAUGHT_UP_TIMEOUT_MS = 2000;
const QUIET_LISTENER: ChannelListener = { onPayload() {}, onLost() {}, onBack() {} };

/**
 * Every LISTEN of a pool on one connection of its own (a NOTIFY wakes each listening connection of
 * the database, so one per process, not one per channel). When that connection breaks, each
 * listener's `onLost` is called at once and the connection is re-established with backoff; once
 * listening again, `onBack` then `onPayload("")` tell each listener that notifications may have
 * been missed. (An empty payload alone does not say the connection is back: this process's own
 * committed writes are told to the outbox's listeners with one, while the connection is lost too.)
 */
function listeningConnection(pool: pg.Pool, onConnectionError: (err: Error) => void) {
  const channels = new Map<string, Set<ChannelListener>>();
  let client: pg.PoolClient | null = null;
  let connecting: Promise<pg.PoolClient> | null = null;
  let retry: NodeJS.Timeout | null = null;
  let closed = false;

  /**
   * Gives `payload` to the channel's listeners in this process. One listener's failure reaches
   * neither the others nor the caller: the listening connection (an uncaught throw), or a write
   * that has committed (committedNotifier).
   */
  const tell = (channel: string, payload: string) => {
    for (const l of channels.get(channel) ?? []) {
      try {
        l.onPayload(payload);
      } catch {}
    }
  };
  /** The probes of listenersCaughtUp this process waits on, by token: told each answering backend. */
  const probes = new Map<string, (backendPid: number) => void>();
  /**
   * A probe comes after every notice committed before it (PostgreSQL delivers in commit order,
   * across channels), and those have been told synchronously as they came: answered at once.
   */
  function onCaughtUpNotice(c: pg.PoolClient, msg: pg.Notification) {
    const payload = msg.payload ?? "";
    if (payload.startsWith("w:")) {
      c.query("SELECT pg_notify($1, $2)", [CAUGHT_UP_CHANNEL, `a:${payload.slice(2)}`]).catch(() => {});
    } else if (payload.startsWith("a:")) {
      probes.get(payload.slice(2))?.(msg.processId);
    }
  }
  function onNotification(this: pg.PoolClient, msg: pg.Notification) {
    if (msg.channel === CAUGHT_UP_CHANNEL) onCaughtUpNotice(this, msg);
    else tell(msg.channel, msg.payload ?? "");
  }
  const detach = (c: pg.PoolClient) => {
    c.off("notification", onNotification);
    c.off("error", onError);
  };
  function onError(err: Error) {
    onConnectionError(err);
    const c = client;
    client = null;
    if (c) {
      detach(c);
      c.release(err);
    }
    if (closed || channels.size === 0) return;
    for (const listeners of channels.values()) for (const l of listeners) l.onLost();
    reconnectLater(250);
  }
  async function connect(): Promise<pg.PoolClient> {
    const c = await pool.connect();
    c.on("notification", onNotification);
    c.on("error", onError);
    try {
      for (const channel of channels.keys()) await c.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
      // Answering probes from now on; then named, so that probes wait for this connection.
      await c.query(`LISTEN ${CAUGHT_UP_CHANNEL}`);
      await c.query(`SET application_name = '${LISTENING_APPLICATION}'`);
    } catch (err) {
      detach(c);
      // Closed, not given back: it may hold some of the LISTENs already.
      c.release(true);
      throw err;
    }
    return c;
  }
  /** The listening connection, made when there is none (one attempt shared by its callers). */
  function connected(): Promise<pg.PoolClient> {
    if (client) return Promise.resolve(client);
    connecting ??= connect()
      .then((c) => {
        client = c;
        return c;
      })
      .finally(() => {
        connecting = null;
      });
    return connecting;
  }
  function reconnectLater(delay: number) {
    if (retry) return;
    retry = setTimeout(async () => {
      retry = null;
      if (closed || channels.size === 0) return;
      try {
        await connected();
      } catch {
        if (!closed) reconnectLater(Math.min(delay * 2, MAX_RELISTEN_DELAY_MS));
        return;
      }
      for (const listeners of channels.values())
        for (const l of listeners) {
          l.onBack();
          l.onPayload("");
        }
    }, delay);
    retry.unref();
  }
  /** Gives the connection back to the pool in a clean state (no channel left, or closing). */
  async function letGo() {
    const c = client;
    client = null;
    if (!c) return;
    detach(c);
    c.on("error", () => {});
    await c.query("UNLISTEN *").catch(() => {});
    await c.query("RESET application_name").catch(() => {});
    c.release();
  }

  /** Adds a listener of `channel` (LISTENing first if it is the channel's first): its unlisten. */
  async function listen(channel: string, listener: ChannelListener): Promise<() => Promise<void>> {
    const listeners = channels.get(channel) ?? new Set<ChannelListener>();
    const first = listeners.size === 0;
    channels.set(channel, listeners);
    listeners.add(listener);
    try {
      const c = await connected();
      // LISTEN twice is harmless (a connection made meanwhile has listened already).
      if (first) await c.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
    } catch (err) {
      listeners.delete(listener);
      if (listeners.size === 0) channels.delete(channel);
      throw err;
    }
    let active = true;
    return async () => {
      if (!active) return;
      active = false;
      listeners.delete(listener);
      if (listeners.size > 0 || channels.get(channel) !== listeners) return;
      channels.delete(channel);
      if (channels.size === 0) {
        if (retry) clearTimeout(retry);
        retry = null;
        await connecting?.catch(() => {});
        if (channels.size === 0) await letGo();
      } else if (channel !== CAUGHT_UP_CHANNEL) {
        // (The probes' channel stays listened while the connection lives: it answers other
        // processes' probes whether or not this process waits on one.)
        await client?.query(`UNLISTEN ${pg.escapeIdentifier(channel)}`).catch(() => {});
      }
    };
  }

  return {
    tell,
    listen,
    /**
     * Sends a probe behind every notice committed so far and waits for the answer of each listening
     * connection of the database (pg_stat_activity's, by application_name), bounded by `timeoutMs`.
     */
    async caughtUp(timeoutMs: number): Promise<void> {
      const token = randomUUID();
      const answered = new Set<number>();
      let expected: number[] | null = null;
      let over = false;
      let finish = () => {};
      const finished = new Promise<void>((resolve) => {
        finish = () => {
          over = true;
          resolve();
        };
      });
      const settle = () => {
        if (expected?.every((pid) => answered.has(pid))) finish();
      };
      probes.set(token, (pid) => {
        answered.add(pid);
        settle();
      });
      const timer = setTimeout(finish, timeoutMs);
      timer.unref();
      // The whole of it within the bound: a connection slow to come counts against it too.
      const probing = (async () => {
        // This process's connection listens (and answers) before the probe is sent; with a
        // listener of its own (one shared by two waits would be unlistened by the first).
        const unlisten = await listen(CAUGHT_UP_CHANNEL, { ...QUIET_LISTENER });
        try {
          if (over) return;
          const { rows } = await pool.query<{ pids: number[] }>(
            `SELECT array(SELECT pid FROM pg_stat_activity
                           WHERE datname = current_database() AND application_name = $2) AS pids,
                    pg_notify($1, $3)`,
            [CAUGHT_UP_CHANNEL, LISTENING_APPLICATION, `w:${token}`],
          );
          expected = rows[0]?.pids ?? [];
          settle();
          await finished;
        } finally {
          await unlisten();
        }
      })();
      // No probe, or no connection to hear the answers: nothing more can be known.
      probing.catch(finish);
      await finished;
      clearTimeout(timer);
      probes.delete(token);
    },
    async close() {
      closed = true;
      if (retry) clearTimeout(retry);
      retry = null;
      channels.clear();
      await connecting?.catch(() => {});
      await letGo();
    },
  };
}

/**
 * pg-pool's own `query()` gives its connection back with the statement's error, and a connection
 * given back with any error is closed: every statement sent on its own that the server refused (a
 * value it rejects, a key already taken, a statement timeout) cost the next statement a new
 * backend. A refusal (severity ERROR, with its SQLSTATE) leaves the session as it was (pg forgets
 * a named statement whose Parse failed, and keeps one whose execution failed, as the server does),
 * so the connection goes back to the pool; a lost or ending connection is still closed (the pool's
 * own checks), and so is one given back with any other error. pg-pool's `_release` is the one
 * place its releases pass through (pg-pool 3; test/db/refusals-keep-connections.test.ts pins it).
 */
function keepConnectionsAfterRefusals(pool: pg.Pool): void {
  const inner = pool as unknown as { _release(client: unknown, idle: unknown, err?: unknown): unknown };
  if (typeof inner._release !== "function")
    throw new Error(
      "This pg-pool has no _release (pg-pool 3 has): keepConnectionsAfterRefusals in src/db/database.ts must follow the upgrade, or keep pg-pool at 3 (test/db/refusals-keep-connections.test.ts).",
    );
  const release = inner._release.bind(pool);
  inner._release = (client, idle, err) => release(client, idle, err && refusedOnly(err) ? undefined : err);
}

/** An error the server answered a statement with, the session going on (not FATAL, not PANIC). */
function refusedOnly(err: unknown): boolean {
  return answeredByServer(err) && (err as { severity?: unknown }).severity === "ERROR";
}

/**
 * The watchdog's probe: `SELECT 1` on a connection of its own (the pool's may all be stuck). The
 * watchdog times it (its connection, then its answer from when the statement is sent) and gives it
 * up through `attempt.signal`: no timer of its own, which a lagging event loop would fire early.
 */
async function probeFresh(connectionString: string, attempt: ProbeAttempt): Promise<void> {
  const client = new pg.Client({
    connectionString,
    application_name: "dimensio-watchdog",
  } as pg.ClientConfig);
  client.on("error", () => {}); // the probe's outcome is its promise
  const giveUp = () =>
    (client as unknown as { connection: { stream: { destroy(): void } } }).connection.stream.destroy();
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

export function openPostgres(connectionString: string, opts: OpenOptions = {}): DatabaseHandle {
  const statementTimeoutMs = opts.statementTimeoutMs ?? DEFAULT_STATEMENT_TIMEOUT_MS;
  const transactionTimeoutMs = opts.transactionTimeoutMs ?? statementTimeoutMs;
  const pool = new pg.Pool({
    connectionString,
    max: opts.max ?? 10,
    application_name: "dimensio",
    statement_timeout: statementTimeoutMs,
    // Prepared statements keep their parse, never a generic plan: tenants differ too much in size
    // for one plan to fit all (a generic count of one city's customers chose a sequential scan,
    // twice the time of the custom plan; docs/benchmarks.md).
    options: "-c plan_cache_mode=force_custom_plan",
    // Statements are sent without waiting for the previous one's answer (pg 8.23): a transaction's
    // BEGIN travels with its first statement, and its last deferred statement with COMMIT.
    pipeline: true,
    // A database that is away fails a request within this (503), instead of leaving it waiting.
    connectionTimeoutMillis: opts.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS,
    // A peer gone without a word (a cut network) is noticed by TCP keepalive, not only on next use.
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
    // The server cancels a statement at statement_timeout (504); one whose answer does not come
    // even QUERY_TIMEOUT_GRACE_MS later travels a dead network: pg then destroys the connection
    // (pipeline mode), the statement fails as DATABASE_UNAVAILABLE instead of hanging.
    query_timeout: statementTimeoutMs + QUERY_TIMEOUT_GRACE_MS,
  } as pg.PoolConfig);
  const onConnectionError = opts.onConnectionError ?? (() => {});
  // An idle client that loses its connection must not crash the process (the pool drops it).
  pool.on("error", (err) => onConnectionError(err, "idle"));
  keepConnectionsAfterRefusals(pool);
  const inTransaction = new WeakSet<pg.PoolClient>();
  const sends = outgoing(inTransaction);
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
  pool.on("connect", (client) => {
    sends.wrap(client);
    watchdog?.watch(client);
  });
  // While the watchdog holds the database down, statements are refused at once (503).
  const answering = async () => watchdog?.check();
  const pooled = observed(pgQueryable(pool), opts.onStatement);
  const base: TxQueryable = {
    query: (text, params, o) => answering().then(() => pooled.query(text, params, o)),
    exec: (sql) => answering().then(() => pooled.exec(sql)),
  };
  const tell: StatementObserver = opts.onStatement ?? (() => {});
  const listening = listeningConnection(pool, (err) => onConnectionError(err, "listening"));
  const notifier = committedNotifier(pool, listening.tell);
  let closing: Promise<void> | null = null;
  return {
    kind: "postgres",
    pool,
    connectionString,
    watchPool(other) {
      if (!watchdog) return;
      other.on("connect", (client) => watchdog.watch(client));
      const connect = other.connect.bind(other) as (cb?: unknown) => unknown;
      // pg-pool's own query() asks this.connect with a callback; Prisma's adapter without.
      (other as unknown as { connect: (cb?: unknown) => unknown }).connect = (cb) => {
        try {
          watchdog.check();
        } catch (err) {
          if (typeof cb !== "function") return Promise.reject(err);
          process.nextTick(cb as (e: unknown) => void, err);
          return undefined;
        }
        return connect(cb);
      };
    },
    query: base.query,
    exec: base.exec,
    async transaction<T>(
      fn: (tx: Queryable & ScriptRunner) => Promise<T>,
      txOpts?: TransactionOptions,
    ): Promise<T> {
      watchdog?.check();
      // A checked-out client has no listener of the pool's: a connection broken while this
      // transaction holds it (between statements, or under one) would be an unhandled 'error'
      // event. Its statements fail on their own; the client is then discarded, not reused.
      let broken: Error | null = null;
      const onBroken = (err: Error) => {
        if (!broken) onConnectionError(err, "transaction");
        broken ??= err;
      };
      // The connection is taken from the pool by the transaction's first statement: a transaction
      // that sends nothing (a create written by its group's statement, create-groups.ts) takes
      // none. Statements given while it is being taken go out in their order once it is there.
      let held: Held | null = null;
      let connecting: Promise<Held> | null = null;
      /** Why the pool gave no connection (its statements fail with it). */
      let refused: { err: unknown } | null = null;
      /** Statements given while the connection is on its way, in their order. */
      let waiting: Array<{ send: (h: Held) => void; fail: (err: unknown) => void }> = [];
      const connection = (): Promise<Held> =>
        (connecting ??= pool.connect().then(
          (client) => {
            const h: Held = { client, raw: pgQueryable(client) };
            held = h;
            client.on("error", onBroken);
            inTransaction.add(client);
            const due = waiting;
            waiting = [];
            for (const w of due) w.send(h);
            return h;
          },
          (err: unknown) => {
            refused = { err };
            const due = waiting;
            waiting = [];
            for (const w of due) w.fail(err);
            throw err;
          },
        ));
      /** `send` on the transaction's connection: now when it is there, else once it is. */
      const onConnection = <R>(send: (h: Held) => Promise<R>): Promise<R> => {
        if (held) return send(held);
        if (refused) return Promise.reject(refused.err);
        return new Promise<R>((resolve, reject) => {
          waiting.push({
            send: (h) => {
              try {
                send(h).then(resolve, reject);
              } catch (err) {
                reject(err);
              }
            },
            fail: reject,
          });
          connection().catch(() => {}); // the failure reaches `fail`
        });
      };
      const deferred = deferredWork();
      /** What the transaction changed, per channel to wake once it commits. */
      const notices = new Map<string, NoticeItems>();
      const notice = (channel: string, item: string | undefined) =>
        void notices.set(channel, addNoticeItems(notices.get(channel) ?? null, noticeItemsOf(item))!);
      /** The NOTIFYs the transaction carries (channel, what each names). */
      const claimed: Array<[string, NoticeItems]> = [];
      /** The payload of the NOTIFY of `channel` this commit carries, or null when it carries none. */
      const claimNotice = (channel: string, items: NoticeItems): string | null => {
        const named = notifier.claim(channel, items);
        if (named === null) return null;
        claimed.push([channel, named]);
        return noticePayload(named);
      };
      const tellCommitted = () => {
        for (const [channel, items] of notices) notifier.committed(channel, items);
      };
      // BEGIN goes out with the first statement (pipeline mode: not awaited), and not at all when
      // the transaction is one statement sent on its own (lastStatement).
      let opened = false;
      /** lastStatement sent its statement on its own: "sent", then "committed" once answered. */
      let alone: "sent" | "committed" | null = null;
      /** COMMIT, once sent (after the transaction's work, or right behind its lastStatement). */
      let committing: Promise<unknown> | null = null;
      try {
        // Statements sent and not answered yet: one sent meanwhile shares their round trip.
        let inFlight = 0;
        const track = <R>(sent: Promise<R>): Promise<R> => {
          inFlight++;
          sent.then(
            () => inFlight--,
            () => inFlight--,
          );
          return sent;
        };
        let begun: Promise<unknown> | null = null;
        /** Sends the NOTIFY the commit carries (when it is to carry one) and COMMIT: once. */
        const commit = (): Promise<unknown> => {
          if (committing) return committing;
          // Other processes' listeners: a NOTIFY in the transaction itself, pipelined with COMMIT.
          for (const [channel, items] of notices) {
            const payload = claimNotice(channel, items);
            if (payload === null) continue;
            tell("SELECT pg_notify($1, $2)", { pipelined: inFlight > 0 });
            deferred.defer(
              track(
                onConnection(({ client }) => client.query("SELECT pg_notify($1, $2)", [channel, payload])),
              ),
            );
          }
          tell("COMMIT", { pipelined: inFlight > 0 });
          committing = track(onConnection(({ client }) => client.query("COMMIT")));
          committing.catch(() => {});
          return committing;
        };
        const open = () => {
          if (alone || committing)
            throw new Error("The transaction has ended: nothing may follow its last statement.");
          if (opened) return;
          opened = true;
          tell("BEGIN", { pipelined: false });
          begun = track(
            onConnection(({ client }) => {
              sends.begin(client, txOpts?.plan ?? "custom");
              return client.query("BEGIN");
            }),
          );
          begun.catch(() => {});
        };
        const afterBegin = async <R>(sent: Promise<R>): Promise<R> => {
          if (begun) {
            const b = begun;
            begun = null;
            sent.catch(() => {});
            await b;
          }
          return sent;
        };
        const tx: TxQueryable = {
          query: (text, params, o) =>
            afterBegin(track(onConnection(({ raw }) => raw.query(text, params, o)))),
          exec: (sql) => afterBegin(track(onConnection(({ raw }) => raw.exec(sql)))),
          defer: deferred.defer,
          notifyAfterCommit: notice,
        };
        const observedTx = observed(tx, opts.onStatement, () => inFlight > 0);
        const opening: TxQueryable = {
          ...aroundEachStatement(observedTx, open),
          async lastStatement<R>(
            wake: { channel: string; item?: string },
            text: (payload: string | null) => string,
            params: readonly unknown[],
            o?: QueryOptions,
          ): Promise<QueryResult<R>> {
            if (opened || alone) {
              notice(wake.channel, wake.item);
              const sent = opening.query<R>(text(null), params, o);
              // Nothing follows it: COMMIT goes right behind it, sharing its round trip. Should it
              // fail, the transaction is aborted and that COMMIT rolls it back.
              commit();
              return sent;
            }
            alone = "sent";
            // Other processes' relays: a NOTIFY in the statement itself, folded as after a COMMIT.
            const payload = claimNotice(wake.channel, noticeItemsOf(wake.item));
            const sql = text(payload === null ? null : `$${params.length + 1}`);
            tell(sql, { pipelined: false });
            // Nothing to send with it: out at once, not corked to the end of the turn.
            const { client, raw } = await connection();
            inTransaction.delete(client);
            let res: QueryResult<R>;
            try {
              res = await raw.query<R>(sql, payload === null ? params : [...params, payload], o);
            } catch (err) {
              // The server refused the statement (an error with its SQLSTATE): a statement that is
              // its own transaction changed nothing, so the transaction is as it was before it and
              // may send another (a group of creates falls back to each create on its own,
              // src/resolvers/write/create-groups.ts). The NOTIFY it carried goes on its own.
              if (!broken && answeredByServer(err)) {
                alone = null;
                if (payload !== null) {
                  const [channel, named] = claimed.pop()!;
                  notifier.unclaim(channel, named);
                }
              }
              throw err;
            }
            alone = "committed";
            notice(wake.channel, wake.item);
            return res;
          },
        };
        const result = await fn(withDeadline(opening, transactionTimeoutMs));
        if (alone === "committed" || !opened) {
          await deferred.all();
          tellCommitted();
          return result;
        }
        if (begun) await begun;
        const committed = committing ?? commit();
        // A deferred statement that failed aborted the transaction: COMMIT then rolls it back.
        await deferred.all();
        await committed;
        tellCommitted();
        return result;
      } catch (err) {
        if (!broken && opened && !alone && !committing) {
          tell("ROLLBACK", { pipelined: false });
          await onConnection(({ client }) => client.query("ROLLBACK")).catch(() => {});
        }
        // A COMMIT sent behind a last statement that failed rolls back: answered before release.
        const sentCommit = committing as Promise<unknown> | null; // assigned in commit()
        if (sentCommit) await sentCommit.catch(() => {});
        // What a rolled-back transaction was to carry goes on its own (a statement sent alone
        // that committed carried it).
        if (alone !== "committed") for (const [channel, named] of claimed) notifier.unclaim(channel, named);
        // A statement sent alone that committed stays committed: this process's relays are told.
        if (alone === "committed") tellCommitted();
        throw err;
      } finally {
        // A connection asked for (even one still on its way) goes back to the pool.
        const asked = connecting as Promise<Held> | null; // assigned in connection()
        const taken = asked ? await asked.catch(() => null) : null;
        if (taken) {
          inTransaction.delete(taken.client);
          taken.client.off("error", onBroken);
          taken.client.release(broken ?? undefined);
        }
      }
    },
    listen: (channel, onPayload, opts) =>
      listening.listen(channel, {
        onPayload,
        onLost: opts?.onLost ?? (() => {}),
        onBack: opts?.onBack ?? (() => {}),
      }),
    listenersCaughtUp: (timeoutMs = CAUGHT_UP_TIMEOUT_MS) => listening.caughtUp(timeoutMs),
    close() {
      // The pool ends only when every client is back: listening clients are returned first.
      closing ??= (async () => {
        watchdog?.stop();
        notifier.stop();
        await listening.close();
        await pool.end();
      })();
      return closing;
    },
  };
}

// ---------------------------------------------------------------- PGlite

const pgliteParsers = {
  [INT8]: parseBigintish,
  [NUMERIC]: parseNumeric,
  [TIMESTAMPTZ]: (v: string) => new Date(v),
};

interface PgliteLike {
  query<T>(q: string, p?: unknown[], o?: object): Promise<{ rows: T[]; affectedRows?: number }>;
  exec(q: string): Promise<unknown>;
}

/**
 * Resolves in the event loop's check phase, after pending I/O callbacks have run. PGlite executes
 * a statement synchronously on this thread and answers through promises, so a chain of
 * statements (a GraphQL operation's ten aliased pages) runs as one unbroken run of microtasks:
 * another request's socket is not even read until the chain ends. Yielding before each
 * statement lets it in between (bench/isolation, ten aliased pages of 1,000: tenant B's GET p50 160 → 32 ms).
 */
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

function pgliteQueryable(db: PgliteLike, yieldFirst: boolean): Queryable & ScriptRunner {
  return {
    async query<R>(text: string, params: readonly unknown[] = []): Promise<QueryResult<R>> {
      if (yieldFirst) await nextTurn();
      const res = await db.query<R>(text, params as unknown[], { parsers: pgliteParsers });
      return { rows: res.rows, rowCount: res.affectedRows || res.rows.length };
    },
    async exec(sql: string) {
      await db.exec(sql);
    },
  };
}

export class DatabaseInUseError extends Error {}

/**
 * The embedded database belongs to one process at a time (two would corrupt it): a lock file
 * beside the data directory holds the owner's pid. A lock whose process is gone is taken over.
 */
async function lockDataDir(dataDir: string): Promise<() => Promise<void>> {
  const lockFile = `${dataDir}.lock`;
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      await writeFile(lockFile, String(process.pid), { flag: "wx" });
      return () => rm(lockFile, { force: true });
    } catch (err) {
      if ((err as { code?: string }).code !== "EEXIST") throw err;
      const owner = Number((await readFile(lockFile, "utf8").catch(() => "")).trim());
      if (Number.isInteger(owner) && owner > 0 && processAlive(owner)) {
        throw new DatabaseInUseError(
          `The embedded database in ${dataDir} is in use by process ${owner} (a running \`npm start\`?). ` +
            "Stop it first, or point both at PostgreSQL with DATABASE_URL.",
        );
      }
      await rm(lockFile, { force: true });
    }
  }
  throw new DatabaseInUseError(`Could not lock the embedded database in ${dataDir}.`);
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as { code?: string }).code === "EPERM";
  }
}

/**
 * PGlite's own start parameters plus smaller memory settings: the embedded database serves one
 * process's requests, so PostgreSQL's server defaults (128 MB of shared buffers) mostly cost
 * resident memory for nothing (docs/benchmarks.md has the figures).
 */
export const PGLITE_SETTINGS: readonly string[] = [
  ...[
    "shared_buffers=16MB",
    "wal_buffers=1MB",
    "work_mem=4MB",
    "maintenance_work_mem=16MB",
    "temp_buffers=2MB",
  ].flatMap((setting) => ["-c", setting]),
];

/** dataDir null: an in-memory database (tests). */
export async function openPglite(
  dataDir: string | null,
  opts: Pick<OpenOptions, "transactionTimeoutMs" | "onStatement"> = {},
): Promise<DatabaseHandle> {
  const transactionTimeoutMs = opts.transactionTimeoutMs ?? DEFAULT_STATEMENT_TIMEOUT_MS;
  const unlock = dataDir ? await lockDataDir(dataDir) : async () => {};
  let pglite: PGlite;
  try {
    const { PGlite } = await import("@electric-sql/pglite");
    const options = { startParams: [...PGlite.defaultStartParams, ...PGLITE_SETTINGS] };
    pglite = dataDir ? await PGlite.create(dataDir, options) : await PGlite.create(options);
  } catch (err) {
    await unlock();
    throw err;
  }
  const base = observed(pgliteQueryable(pglite, true), opts.onStatement);
  const tell: StatementObserver = opts.onStatement ?? (() => {});
  return {
    kind: "pglite",
    pglite,
    query: base.query,
    exec: base.exec,
    transaction<T>(fn: (tx: Queryable & ScriptRunner) => Promise<T>): Promise<T> {
      // PGlite serialises: while this runs, every other query on the instance waits.
      // The deadline bounds how long one request can hold everyone else.
      tell("BEGIN", { pipelined: false });
      // A transaction holds the whole database: its statements do not yield (others wait anyway).
      return nextTurn()
        .then(() =>
          pglite.transaction(async (tx) => {
            const deferred = deferredWork();
            const q: TxQueryable = { ...pgliteQueryable(tx, false), defer: deferred.defer };
            const result = await fn(withDeadline(observed(q, opts.onStatement), transactionTimeoutMs));
            await deferred.all();
            return result;
          }),
        )
        .then(
          (result) => {
            tell("COMMIT", { pipelined: false });
            return result;
          },
          (err) => {
            tell("ROLLBACK", { pipelined: false });
            throw err;
          },
        );
    },
    // One process: its listeners are told of a notice before the statement that sent it answers.
    listenersCaughtUp: async () => {},
    async listen(channel, onPayload) {
      const unlisten = await pglite.listen(channel, onPayload);
      return async () => {
        // A closed instance listens to nothing any more.
        if (!pglite.closed) await unlisten().catch(() => {});
      };
    },
    async close() {
      if (!pglite.closed) await pglite.close();
      await unlock();
    },
  };
}
