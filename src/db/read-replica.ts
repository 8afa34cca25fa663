// Reads of a service with a read replica (DATABASE_READ_URL; docs/faults.md). They go to the
// replica while it answers. A read the replica cannot serve because it is unreachable (refused,
// broken, not answering: isDatabaseUnavailable) is served by the primary instead, and so is every
// read after it while the replica is down: the replica is asked `SELECT 1` every `retryMs`, and
// reads go back to it at its first answer. Readiness does not depend on the replica (the primary
// can serve every read), but /healthz and dimensio_dependency_up show it as `database_read`.
import type { DependencyState, Queryable } from "../types.ts";
import { isDatabaseUnavailable } from "./errors.ts";

/** How often a replica that is down is asked whether it answers again. */
export const REPLICA_RETRY_MS = 1000;
/** The longest a replica's health check waits for its answer. */
export const REPLICA_CHECK_TIMEOUT_MS = 2000;

export interface ReadRoutingOptions {
  replica: Queryable;
  primary: Queryable;
  /** Told once when the replica is found down (with why), and once when it answers again. */
  onDown?: (err: unknown) => void;
  onUp?: () => void;
  /** Told of each read the primary served because the replica was down (the metric). */
  onFallback?: () => void;
  retryMs?: number;
  checkTimeoutMs?: number;
}

export interface ReadRouting {
  /** Where reads go: the replica, or the primary while the replica is down. */
  readDb: Queryable;
  /** The replica's state as last known (`unknown` before any read or check). */
  state(): DependencyState;
  /** Asks the replica now (bounded; concurrent callers share one question); updates the state. */
  check(): Promise<DependencyState>;
  stop(): void;
}

export function readReplicaRouting(opts: ReadRoutingOptions): ReadRouting {
  const { replica, primary } = opts;
  const retryMs = opts.retryMs ?? REPLICA_RETRY_MS;
  const checkTimeoutMs = opts.checkTimeoutMs ?? REPLICA_CHECK_TIMEOUT_MS;
  let state: DependencyState = "unknown";
  let retry: NodeJS.Timeout | null = null;
  let checking: Promise<DependencyState> | null = null;
  let stopped = false;

  function markDown(err: unknown) {
    if (state !== "down") {
      state = "down";
      opts.onDown?.(err);
    }
    scheduleRetry();
  }
  function markUp() {
    const wasDown = state === "down";
    state = "up";
    if (retry) clearTimeout(retry);
    retry = null;
    if (wasDown) opts.onUp?.();
  }
  function scheduleRetry() {
    if (retry || stopped) return;
    retry = setTimeout(() => {
      retry = null;
      void check().then((s) => {
        if (s === "down") scheduleRetry();
      });
    }, retryMs);
    retry.unref();
  }

  async function ask(): Promise<DependencyState> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${checkTimeoutMs} ms`)), checkTimeoutMs);
      timer.unref();
    });
    const asked = replica.query("SELECT 1");
    asked.catch(() => {});
    try {
      await Promise.race([asked, late]);
      markUp();
    } catch (err) {
      markDown(err);
    } finally {
      clearTimeout(timer);
    }
    return state;
  }
  function check(): Promise<DependencyState> {
    checking ??= ask().finally(() => {
      checking = null;
    });
    return checking;
  }

  const readDb: Queryable = {
    async query(text, params, queryOpts) {
      if (state === "down") {
        opts.onFallback?.();
        return primary.query(text, params, queryOpts);
      }
      try {
        const res = await replica.query(text, params, queryOpts);
        if (state === "unknown") state = "up";
        return res as never;
      } catch (err) {
        if (!isDatabaseUnavailable(err)) throw err;
        // A read changes nothing: the primary can answer it as well.
        markDown(err);
        opts.onFallback?.();
        return primary.query(text, params, queryOpts);
      }
    },
  };

  return {
    readDb,
    state: () => state,
    check,
    stop() {
      stopped = true;
      if (retry) clearTimeout(retry);
      retry = null;
    },
  };
}
