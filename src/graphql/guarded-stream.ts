// A live subscription's results, ended from outside: when its session, token or grants no longer
// hold (src/graphql/subscription-guard.ts), the source is closed, one result carries the error,
// then the stream ends; its admission is released once, however it ends.
import type { ExecutionResult } from "graphql";
import { decodeJwt } from "jose";
import type { ApiError } from "../errors.ts";
import { asGraphQLError } from "./errors.ts";

export interface StopSignal {
  error: ApiError | null;
  /** Told once when the subscription must end (set by the stream that carries it). */
  onEnd: (() => void) | null;
  end: (err: ApiError) => void;
}

export function stopSignal(): StopSignal {
  const signal: StopSignal = {
    error: null,
    onEnd: null,
    end(err) {
      if (signal.error) return;
      signal.error = err;
      signal.onEnd?.();
    },
  };
  return signal;
}

/** The expiry (epoch seconds) of a bearer token verified already; null if none. */
export function tokenExpiry(token: string | null): number | null {
  if (!token) return null;
  try {
    const { exp } = decodeJwt(token);
    return typeof exp === "number" ? exp : null;
  } catch {
    return null;
  }
}

/**
 * A subscription's results until `stop` ends it: the source is closed (which answers a pending
 * read with its end and stops its listening), then one result carries the error, then the end.
 */
export function guarded(
  source: AsyncIterable<ExecutionResult>,
  stop: StopSignal,
  release: () => void,
): AsyncIterableIterator<ExecutionResult> {
  const it = source[Symbol.asyncIterator]();
  let done = false;
  let closing: Promise<unknown> | null = null;
  const close = () => {
    closing ??= Promise.resolve(it.return?.()).catch(() => undefined);
    return closing;
  };
  stop.onEnd = () => void close();
  const finish = async (): Promise<IteratorResult<ExecutionResult>> => {
    done = true;
    release();
    await close();
    return { value: undefined, done: true };
  };
  const iterator: AsyncIterableIterator<ExecutionResult> = {
    async next() {
      if (done) return { value: undefined, done: true };
      const next = stop.error ? null : await it.next();
      if (stop.error) {
        await finish();
        return { value: { errors: [asGraphQLError(stop.error)] }, done: false };
      }
      if (next?.done) {
        done = true;
        release();
      }
      return next as IteratorResult<ExecutionResult>;
    },
    return: finish,
    async throw(err) {
      await finish();
      throw err;
    },
    [Symbol.asyncIterator]() {
      return iterator;
    },
  };
  return iterator;
}
