// The readiness probe's checks: the database answers, and every migration the build carries is
// applied. The migration names are read from disk once; once they are all applied they stay so,
// and later probes only ask the database for `SELECT 1`. Concurrent probes share one check, so a
// load balancer polling under load adds at most one cheap statement at a time.
//
// Readiness depends on the database only: the broker, Redis and object storage are not checked
// (writes go through the outbox while the broker is away; docs/faults.md). On PostgreSQL a probe
// answers within READINESS_TIMEOUT_MS whatever the database does; the embedded database is in
// the process (it cannot be away), so a probe there waits for its turn like any statement.
import type { DatabaseHandle } from "./database.ts";
import { readMigrations } from "./migrate.ts";

export type ReadinessChecks = Record<string, string>;

/** The longest a readiness probe waits for PostgreSQL's answer before it says "not ready". */
export const READINESS_TIMEOUT_MS = 2000;

export function createReadinessCheck(
  db: DatabaseHandle,
  migrationsDir?: string,
  timeoutMs = READINESS_TIMEOUT_MS,
): () => Promise<ReadinessChecks> {
  let names: Promise<string[]> | null = null;
  let migrationsApplied = false;
  let inFlight: Promise<ReadinessChecks> | null = null;

  async function check(): Promise<ReadinessChecks> {
    names ??= readMigrations(migrationsDir).then((ms) => ms.map((m) => m.name));
    const expected = await names;
    try {
      if (migrationsApplied) {
        await db.query("SELECT 1");
        return { database: "ok", migrations: "ok" };
      }
      const res = await db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM "_dimensio_migrations" WHERE "name" = ANY($1::text[])`,
        [expected],
      );
      migrationsApplied = Number(res.rows[0]?.n) === expected.length;
      return { database: "ok", migrations: migrationsApplied ? "ok" : "pending" };
    } catch (err) {
      return {
        database: `unreachable: ${err instanceof Error ? err.message : String(err)}`,
        migrations: migrationsApplied ? "ok" : "pending",
      };
    }
  }

  /** The shared check, or "no answer" once `timeoutMs` has passed (PostgreSQL only). */
  function bounded(checking: Promise<ReadinessChecks>): Promise<ReadinessChecks> {
    if (db.kind !== "postgres") return checking;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<ReadinessChecks>((resolve) => {
      timer = setTimeout(
        () =>
          resolve({
            database: `unreachable: no answer within ${timeoutMs} ms`,
            migrations: migrationsApplied ? "ok" : "pending",
          }),
        timeoutMs,
      );
      timer.unref();
    });
    return Promise.race([checking, late]).finally(() => clearTimeout(timer));
  }

  return () => {
    inFlight ??= check().finally(() => {
      inFlight = null;
    });
    return bounded(inFlight);
  };
}
