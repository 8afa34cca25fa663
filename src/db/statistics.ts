// Planner statistics for the embedded database (issue 18 §3). PostgreSQL's autovacuum ANALYZEs a
// table once enough of it changed; PGlite runs no background workers, so without this its planner
// works from default guesses forever. Every DB_ANALYZE_INTERVAL_MS the job asks which tables
// changed past autovacuum's default threshold (50 rows + 10 %) since their last ANALYZE, and
// analyzes those: one statement per interval while nothing changes.
import type { Logger } from "../logger.ts";
import { startPeriodic } from "../periodic.ts";
import type { Database } from "../types.ts";

export interface StatisticsJob {
  /** One round now: resolves to the tables analyzed (tests, tools). */
  runOnce(): Promise<string[]>;
  stop(): Promise<void>;
}

/** Tables changed past autovacuum's default analyze threshold, or never analyzed and not empty. */
const STALE_SQL = `
  SELECT schemaname, relname FROM pg_stat_user_tables
   WHERE n_mod_since_analyze > 50 + 0.1 * GREATEST(n_live_tup, 0)
      OR (last_analyze IS NULL AND last_autoanalyze IS NULL AND n_live_tup > 0)
   ORDER BY relname`;

const quote = (name: string) => `"${name.replaceAll('"', '""')}"`;

export function startStatisticsJob(opts: {
  db: Database;
  logger: Logger;
  intervalMs: number;
}): StatisticsJob {
  const { db, logger } = opts;

  async function runOnce(): Promise<string[]> {
    const { rows } = await db.query<{ schemaname: string; relname: string }>(STALE_SQL);
    const names = rows.map((r) => `${quote(r.schemaname)}.${quote(r.relname)}`);
    // One statement for all of them; ANALYZE runs outside an explicit transaction as well.
    if (names.length > 0) await db.query(`ANALYZE ${names.join(", ")}`);
    return rows.map((r) => r.relname);
  }

  const job = startPeriodic({
    intervalMs: opts.intervalMs,
    round: runOnce,
    onDone: (tables) => {
      if (tables.length) logger.debug({ tables }, "planner statistics refreshed (ANALYZE)");
    },
    onError: (err) => logger.warn({ err }, "refreshing planner statistics (ANALYZE) failed"),
  });
  return { runOnce, stop: job.stop };
}
