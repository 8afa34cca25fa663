// The embedded database (PGlite) behind the same DatabaseHandle as PostgreSQL: one process owns
// its data directory (a lock file), it serialises its transactions, and its listeners are told in
// process. Parsers as on PostgreSQL (src/db/statements.ts): int8 and numeric as JS numbers.
import { readFile, rm, writeFile } from "node:fs/promises";
// PGlite itself is imported by openPglite: a service on PostgreSQL does not load it.
import type { PGlite } from "@electric-sql/pglite";
import type { Queryable, QueryResult } from "../types.ts";
import {
  DEFAULT_STATEMENT_TIMEOUT_MS,
  type DatabaseHandle,
  type OpenOptions,
  type ScriptRunner,
  type StatementObserver,
  type TxQueryable,
} from "./handle.ts";
import { deferredWork, hooked, SERVICE_PARSERS, TIMESTAMPTZ } from "./statements.ts";
import { processAlive } from "../process-alive.ts";

const pgliteParsers = {
  ...SERVICE_PARSERS,
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
  const base = hooked(pgliteQueryable(pglite, true), { onStatement: opts.onStatement });
  const tell: StatementObserver = opts.onStatement ?? (() => {});
  return {
    kind: "pglite",
    pglite,
    query: base.query,
    exec: base.exec,
    async maintenance(sql) {
      await base.query(sql);
    },
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
            const result = await fn(
              hooked(q, { deadlineMs: transactionTimeoutMs, onStatement: opts.onStatement }),
            );
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
