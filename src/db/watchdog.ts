// The database watchdog (docs/faults.md, "Never a hang"): a PostgreSQL server that goes silent on
// open connections (packets dropped, no reset) would otherwise keep a request waiting until pg's
// query timeout, the statement timeout plus 5 s. When a statement of the pool has been waiting
// longer than `boundMs`, the watchdog asks the server a cheap question on a fresh connection of
// its own. An answer vouches for the statement (a long query on a healthy server goes on); no
// answer within `boundMs` declares the database down: every connection of the pool is destroyed
// (their statements fail at once as a lost connection, 503 DATABASE_UNAVAILABLE), new statements
// are refused until a probe answers again (retried every tick), and the pool reconnects on demand.
import type pg from "pg";
import { DatabaseNotAnsweringError } from "../errors.ts";
import { answeredByServer } from "./errors.ts";

/** A statement waiting this long makes the watchdog probe the server (DATABASE_WATCHDOG_MS). */
export const DEFAULT_WATCHDOG_MS = 2000;

export interface WatchdogOptions {
  /** How long a statement may wait before a probe is made, and how long the probe may take. */
  boundMs: number;
  /**
   * Asks the server a cheap question on a fresh connection; resolves once it answers. Rejected or
   * still waiting after `boundMs`: the server is taken for gone.
   */
  probe: (boundMs: number) => Promise<void>;
  /** Told when the database is declared down (with why), and when it answers again. */
  onDown?: (reason: string) => void;
  onUp?: () => void;
}

export interface Watchdog {
  /** Tracks the statements of a connection of the pool (its `query`, wrapped). */
  watch(client: pg.PoolClient): void;
  /** Rejects while the database is declared down (DatabaseNotAnsweringError). */
  check(): void;
  isDown(): boolean;
  stop(): void;
}

interface Waiting {
  client: pg.PoolClient;
  since: number;
}

type Callback = (err: Error | null, res?: unknown) => void;

/**
 * True for a probe failure that says nothing came back: a timeout, a refused or broken connection.
 * A server that answers with an error (a SQLSTATE: too many connections, starting up) is there.
 */
function noAnswer(err: unknown): boolean {
  return !answeredByServer(err);
}

export function createWatchdog(opts: WatchdogOptions): Watchdog {
  const { boundMs } = opts;
  const clients = new Set<pg.PoolClient>();
  const waiting = new Set<Waiting>();
  let down: string | null = null;
  let probing = false;
  let vouchedAt = 0;
  let stopped = false;

  const destroy = (client: pg.PoolClient) =>
    (client as unknown as { connection: { stream: { destroy(): void } } }).connection.stream.destroy();

  /** One probe at a time, bounded by `boundMs` whatever the probe does. */
  async function probe(): Promise<unknown> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(
        () => reject(new DatabaseNotAnsweringError(`no answer to a probe within ${boundMs} ms`)),
        boundMs,
      );
      timer.unref();
    });
    const asked = opts.probe(boundMs);
    asked.catch(() => {});
    try {
      await Promise.race([asked, late]);
      return null;
    } catch (err) {
      return err;
    } finally {
      clearTimeout(timer);
    }
  }

  function declareDown(reason: string) {
    down = reason;
    opts.onDown?.(reason);
    // Every connection of the pool travels the same silent network: given up, idle ones too (a
    // request would otherwise take one and wait on it). Their statements fail as a lost connection.
    for (const client of clients) destroy(client);
  }

  async function tick() {
    if (probing || stopped) return;
    const now = Date.now();
    if (!down) {
      let oldest = now;
      for (const w of waiting) oldest = Math.min(oldest, w.since);
      if (now - oldest < boundMs || now - vouchedAt < boundMs) return;
    }
    probing = true;
    const err = await probe();
    probing = false;
    if (stopped) return;
    if (err === null || !noAnswer(err)) {
      vouchedAt = Date.now();
      if (down) {
        down = null;
        opts.onUp?.();
      }
      return;
    }
    if (!down) declareDown(err instanceof Error ? err.message : String(err));
  }

  const timer = setInterval(() => void tick(), Math.max(25, Math.floor(boundMs / 4)));
  timer.unref();

  return {
    watch(client) {
      clients.add(client);
      client.once("end", () => clients.delete(client));
      const query = client.query.bind(client) as (...args: unknown[]) => unknown;
      (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args) => {
        const w: Waiting = { client, since: Date.now() };
        const done = () => void waiting.delete(w);
        // pg takes a callback as the last argument (pg-pool's query does), or returns a promise.
        const last = args.length - 1;
        if (typeof args[last] === "function") {
          const callback = args[last] as Callback;
          args[last] = (err: Error | null, res?: unknown) => {
            done();
            callback(err, res);
          };
        }
        waiting.add(w);
        const result = query(...args);
        if (result && typeof (result as Promise<unknown>).then === "function") {
          (result as Promise<unknown>).then(done, done);
        } else if (typeof args[last] !== "function") {
          done(); // a query object of its own (not used here): not tracked
        }
        return result;
      };
    },
    check() {
      if (down) throw new DatabaseNotAnsweringError(down);
    },
    isDown: () => down !== null,
    stop() {
      stopped = true;
      clearInterval(timer);
    },
  };
}
