// The readiness probe's checks: the database answers, and every migration the build carries is
// applied. The migration names are read from disk once; once they are all applied they stay so,
// and later probes only ask the database for `SELECT 1`. Concurrent probes share one check, so a
// load balancer polling under load adds at most one cheap statement at a time.
import type { DatabaseHandle } from "./database.ts";
import { readMigrations } from "./migrate.ts";

export type ReadinessChecks = Record<string, string>;

export function createReadinessCheck(
  db: DatabaseHandle,
  migrationsDir?: string,
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
        migrations: "pending",
      };
    }
  }

  return () => {
    inFlight ??= check().finally(() => {
      inFlight = null;
    });
    return inFlight;
  };
}
