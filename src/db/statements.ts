// Statements: how one is sent on a PostgreSQL connection (typed as the service reads them, named
// or not), and the one hook around each statement a handle gives out: the transaction's deadline,
// the watchdog's refusal while the database is down, a transaction's lazy BEGIN and the statement
// observer (tests count round trips with it) are all decided there, once per statement.
import { createHash } from "node:crypto";
import pg from "pg";
import { TransactionTimeoutError } from "../errors.ts";
import type { QueryOptions, QueryResult } from "../types.ts";
import type { StatementObserver, TxQueryable } from "./handle.ts";
import { DescribedOnceQuery } from "./pg-internals.ts";
import { onItsOwn } from "./pool.ts";

const INT8 = 20;
const NUMERIC = 1700;
export const TIMESTAMPTZ = 1184;

/** int8 as a JS number when it is safe (INTEGER fields come back as JSON numbers), else its text. */
export function parseBigintish(v: string): number | string {
  const n = Number(v);
  return Number.isSafeInteger(n) ? n : v;
}

export const parseNumeric = (v: string): number => Number(v);

/** The parsers of the service's results: pg's own, but int8 and numeric as above. */
export const SERVICE_PARSERS: Readonly<Record<number, (v: string) => unknown>> = {
  [INT8]: parseBigintish,
  [NUMERIC]: parseNumeric,
};

const pgTypes = {
  getTypeParser(oid: number, format?: "text" | "binary") {
    const own = SERVICE_PARSERS[oid];
    if (own) return own;
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

/** pg's `query` given a Submittable, or a text, and a callback. */
type SendWithCallback = (
  query: DescribedOnceQuery | string,
  values: undefined,
  callback: (err: Error | null, res: pg.QueryResult) => void,
) => unknown;

/** `query` sent on `client` through DescribedOnceQuery (or a script's text), told to `done`. */
function sendOn(
  client: pg.ClientBase,
  query: DescribedOnceQuery | string,
  done: (err: Error | null, res?: pg.QueryResult) => void,
): void {
  (client.query as unknown as SendWithCallback).call(client, query, undefined, done);
}

/**
 * The statements of one connection (`client`) or, given the pool, each on a connection of its
 * own (src/db/pool.ts, onItsOwn). `named` false (behind PgBouncer's transaction pooling): every
 * statement unnamed, since a name prepared on one server connection is unknown on the next.
 */
export function pgQueryable(on: pg.Pool | pg.ClientBase, named: boolean): TxQueryable {
  const pool = on instanceof pg.Pool ? on : null;
  const send = (query: DescribedOnceQuery | string): Promise<pg.QueryResult> =>
    pool
      ? onItsOwn<pg.QueryResult>(pool, (client, done) => sendOn(client, query, done))
      : new Promise((resolve, reject) =>
          sendOn(on as pg.ClientBase, query, (err, res) => (err ? reject(err) : resolve(res!))),
        );
  return {
    async query<R>(
      text: string,
      params: readonly unknown[] = [],
      opts?: QueryOptions,
    ): Promise<QueryResult<R>> {
      const name = named && opts?.prepare !== undefined ? statementName(opts.prepare, text) : undefined;
      const res = await send(
        new DescribedOnceQuery({
          text,
          values: params as unknown[],
          types: pgTypes,
          name,
          plan: name === undefined ? undefined : opts?.plan,
        }),
      );
      return { rows: res.rows as R[], rowCount: res.rowCount ?? res.rows.length };
    },
    async exec(sql: string) {
      await send(sql);
    },
  };
}

/**
 * `q` with `before` called before each statement given to it (query, exec, and lastStatement when
 * it has one; `sql` null for lastStatement, whose text is chosen as it is sent). A throw from
 * `before` is the statement's failure.
 */
export function aroundEachStatement(q: TxQueryable, before: (sql: string | null) => void): TxQueryable {
  const last = q.lastStatement?.bind(q);
  return {
    ...q,
    query(text, params, opts) {
      try {
        before(text);
      } catch (err) {
        return Promise.reject(err);
      }
      return q.query(text, params, opts);
    },
    exec(sql) {
      try {
        before(sql);
      } catch (err) {
        return Promise.reject(err);
      }
      return q.exec(sql);
    },
    ...(last
      ? {
          lastStatement(notice, text, params, opts) {
            try {
              before(null);
            } catch (err) {
              return Promise.reject(err);
            }
            return last(notice, text, params, opts);
          },
        }
      : {}),
  };
}

/** What is done before each statement, in this order; each part optional. */
export interface StatementHook {
  /** A transaction's: its statements are refused once this long has passed since it began. */
  deadlineMs?: number;
  /** Throws while statements are to be refused (the watchdog's check). */
  check?: () => void;
  /**
   * A transaction's lazy BEGIN, sent with its first statement (not with lastStatement, which is
   * sent on its own when it comes first); it throws once the transaction has ended.
   */
  open?: () => void;
  /** Told each statement's text (lastStatement tells its own). */
  onStatement?: StatementObserver | undefined;
  /** Whether a statement sent now goes out behind one not answered yet (for onStatement). */
  pipelined?: () => boolean;
}

/** `q` with the hook's work done before each of its statements: the one wrapper a handle adds. */
export function hooked(q: TxQueryable, hook: StatementHook): TxQueryable {
  const { check, open, onStatement } = hook;
  const deadline = hook.deadlineMs === undefined ? null : Date.now() + hook.deadlineMs;
  const timeoutMs = hook.deadlineMs ?? 0;
  const pipelined = hook.pipelined ?? (() => false);
  if (deadline === null && !check && !open && !onStatement) return q;
  return aroundEachStatement(q, (sql) => {
    if (deadline !== null && Date.now() > deadline) throw new TransactionTimeoutError(timeoutMs);
    check?.();
    if (sql !== null) open?.();
    if (onStatement && sql !== null) onStatement(sql, { pipelined: pipelined() });
  });
}

/** Work a transaction awaits at its end (Queryable.defer); failures surface there. */
export function deferredWork() {
  const pending: Promise<unknown>[] = [];
  return {
    defer(work: Promise<unknown>) {
      work.catch(() => {});
      pending.push(work);
    },
    all: () => Promise.all(pending),
  };
}
