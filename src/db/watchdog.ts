// The database watchdog (docs/faults.md, "Never a hang"): a PostgreSQL server that goes silent on
// open connections (packets dropped, no reset) would otherwise keep a request waiting until pg's
// query timeout, the statement timeout plus 5 s. When a statement of the pool has been waiting
// longer than `boundMs`, the watchdog asks the server a cheap question on a fresh connection of
// its own. An answer vouches for the statement (a long query on a healthy server goes on); no
// answer within `boundMs` declares the database down: every connection of the pool is destroyed
// (their statements fail at once as a lost connection, 503 DATABASE_UNAVAILABLE), new statements
// are refused until a probe answers again (retried every tick), and the pool reconnects on demand.
//
// Time here is the time the event loop was there to see an answer (`aliveClock`): an interval in
// which the loop itself lagged (a synchronous stretch of work, a long GC pause) counts only as long
// as it was scheduled to last, and the tick that follows it judges nothing: the answers that
// arrived meanwhile are read first. The probe's answer is timed from when its statement was sent
// (its connection made), the connection's making bounded on its own.
import { DatabaseNotAnsweringError } from "../errors.ts";
import { answeredByServer } from "./errors.ts";

/** A statement waiting this long makes the watchdog probe the server (DATABASE_WATCHDOG_MS). */
export const DEFAULT_WATCHDOG_MS = 2000;

/** One probe, as the watchdog hands it to `WatchdogOptions.probe`. */
export interface ProbeAttempt {
  /** Aborted when the watchdog gives the probe up: the probe drops its connection then. */
  signal: AbortSignal;
  /** Called once the probe's statement has left (its connection made): the answer is timed from here. */
  sent(): void;
}

export interface WatchdogOptions {
  /**
   * How long a statement may wait before a probe is made, how long the probe's connection may take
   * to be made, and how long its answer may take once sent.
   */
  boundMs: number;
  /**
   * Asks the server a cheap question on a fresh connection; resolves once it answers. Rejected, or
   * still waiting when the watchdog gives it up (`attempt.signal`): the server is taken for gone.
   */
  probe: (attempt: ProbeAttempt) => Promise<void>;
  /** Told when the database is declared down (with why), and when it answers again. */
  onDown?: (reason: string) => void;
  onUp?: () => void;
  /** Milliseconds of a monotonic clock (performance.now); tests give their own. */
  now?: () => number;
}

/** A connection of the pool, as far as the watchdog gives it up (its socket). */
export interface Destroyable {
  destroy(): void;
  once(event: "close", listener: () => void): unknown;
}

export interface Watchdog {
  /**
   * A statement of the pool was sent (src/db/connection.ts tells each): the function returned is
   * called once it is answered or failed.
   */
  waiting(): () => void;
  /** A connection of the pool (its socket): destroyed when the database is declared down. */
  adopt(connection: Destroyable): void;
  /** Rejects while the database is declared down (DatabaseNotAnsweringError). */
  check(): void;
  isDown(): boolean;
  stop(): void;
}

interface Waiting {
  since: number;
}

/**
 * True for a probe failure that says nothing came back: a timeout, a refused or broken connection.
 * A server that answers with an error (a SQLSTATE: too many connections, starting up) is there.
 */
function noAnswer(err: unknown): boolean {
  return !answeredByServer(err);
}

export interface AliveClock {
  /** The time that counts so far: the clock's, less what the event loop lagged. */
  now(): number;
  /** Called by a timer every `stepMs`: true when this interval lagged (it counted as `stepMs`). */
  advance(): boolean;
}

/**
 * A clock that does not count the event loop's lag: advanced by a timer every `stepMs`, an
 * interval longer than twice that counts as `stepMs` (the loop was held up: nothing could be read
 * meanwhile, however long it was).
 */
export function aliveClock(now: () => number, stepMs: number): AliveClock {
  let counted = 0;
  let last = now();
  const lagged = (elapsed: number) => elapsed > stepMs * 2;
  return {
    now() {
      const elapsed = now() - last;
      return counted + (lagged(elapsed) ? stepMs : elapsed);
    },
    advance() {
      const at = now();
      const elapsed = at - last;
      last = at;
      counted += lagged(elapsed) ? stepMs : elapsed;
      return lagged(elapsed);
    },
  };
}

interface Attempt {
  controller: AbortController;
  /** When it was dispatched, then when its statement was sent (alive time). */
  startedAt: number;
  sentAt: number | null;
}

export function createWatchdog(opts: WatchdogOptions): Watchdog {
  const { boundMs } = opts;
  const stepMs = Math.max(25, Math.floor(boundMs / 4));
  const clock = aliveClock(opts.now ?? (() => performance.now()), stepMs);
  const connections = new Set<Destroyable>();
  const waiting = new Set<Waiting>();
  let down: string | null = null;
  let attempt: Attempt | null = null;
  let vouchedAt = Number.NEGATIVE_INFINITY;
  let stopped = false;

  function declareDown(reason: string) {
    down = reason;
    opts.onDown?.(reason);
    // Every connection of the pool travels the same silent network: given up, idle ones too (a
    // request would otherwise take one and wait on it). Their statements fail as a lost connection.
    for (const connection of connections) connection.destroy();
  }

  function settle(err: unknown) {
    attempt = null;
    if (stopped) return;
    if (err === null || !noAnswer(err)) {
      vouchedAt = clock.now();
      if (down) {
        down = null;
        opts.onUp?.();
      }
      return;
    }
    if (!down) declareDown(err instanceof Error ? err.message : String(err));
  }

  /** One probe at a time; given up by `judge` (alive time), whatever the probe does. */
  function startProbe() {
    const controller = new AbortController();
    const current: Attempt = { controller, startedAt: clock.now(), sentAt: null };
    attempt = current;
    const givenUp = new Promise<unknown>((resolve) =>
      controller.signal.addEventListener("abort", () => resolve(controller.signal.reason), { once: true }),
    );
    let asked: Promise<unknown>;
    try {
      asked = opts.probe({
        signal: controller.signal,
        sent: () => {
          current.sentAt ??= clock.now();
        },
      });
    } catch (err) {
      asked = Promise.reject(err);
    }
    const answered = asked.then(
      () => null,
      (err: unknown) => err ?? new Error("the probe failed"),
    );
    void Promise.race([answered, givenUp]).then((err) => {
      if (!controller.signal.aborted) controller.abort(); // the probe may let its connection go
      if (attempt === current) settle(err);
    });
  }

  /** Gives the probe in flight up once its connection or its answer took `boundMs`. */
  function judge(current: Attempt) {
    const now = clock.now();
    if (current.sentAt === null && now - current.startedAt >= boundMs)
      current.controller.abort(
        new DatabaseNotAnsweringError(`no connection for a probe within ${boundMs} ms`),
      );
    else if (current.sentAt !== null && now - current.sentAt >= boundMs)
      current.controller.abort(new DatabaseNotAnsweringError(`no answer to a probe within ${boundMs} ms`));
  }

  function tick() {
    const lagged = clock.advance();
    if (stopped) return;
    // After an interval the loop lagged, answers that came meanwhile are read before anything is judged.
    if (lagged) return;
    if (attempt) return judge(attempt);
    if (!down) {
      const now = clock.now();
      let oldest = now;
      for (const w of waiting) oldest = Math.min(oldest, w.since);
      if (now - oldest < boundMs || now - vouchedAt < boundMs) return;
    }
    startProbe();
  }

  const timer = setInterval(tick, stepMs);
  timer.unref();

  return {
    waiting() {
      const w: Waiting = { since: clock.now() };
      waiting.add(w);
      return () => void waiting.delete(w);
    },
    adopt(connection) {
      connections.add(connection);
      connection.once("close", () => connections.delete(connection));
    },
    check() {
      if (down) throw new DatabaseNotAnsweringError(down);
    },
    isDown: () => down !== null,
    stop() {
      stopped = true;
      clearInterval(timer);
      attempt?.controller.abort(new DatabaseNotAnsweringError("the watchdog stopped"));
    },
  };
}
