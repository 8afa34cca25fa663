// Record history's retention (HISTORY_RETENTION_DAYS, default 365; 0 keeps everything): revisions
// older than that are deleted in small batches, oldest first, by their CHANGED_AT index. Writers
// only ever insert revisions (and a force delete deletes its record's), so the clean-up's row
// locks meet no writer's, and it takes no table lock a write waits on. A record's latest revision
// is kept whatever its age, so that revision numbers never start again at 1.
import type { Logger } from "../logger.ts";
import { startPeriodic } from "../periodic.ts";
import type { Database, Queryable } from "../types.ts";

export interface HistoryRetentionOptions {
  db: Database;
  logger: Logger;
  /** Revisions older than this many days go (0: none). */
  retentionDays: number;
  /** How often a round runs. */
  intervalMs: number;
  /** Rows a statement deletes at most (one short transaction each). */
  batchSize?: number;
  /** Statements a round runs at most, so a round stays bounded after a long pause. */
  maxBatches?: number;
}

export interface HistoryRetentionJob {
  /** One round now: resolves to the revisions deleted (tests, tools). */
  runOnce(): Promise<number>;
  stop(): Promise<void>;
}

const DEFAULT_BATCH = 1000;
const DEFAULT_MAX_BATCHES = 100;

/**
 * Deletes up to `batchSize` revisions older than `retentionDays` that are not their record's
 * latest, and answers how many it deleted. One statement, its own transaction.
 */
export async function pruneHistoryBatch(
  db: Queryable,
  retentionDays: number,
  batchSize = DEFAULT_BATCH,
): Promise<number> {
  if (retentionDays <= 0) return 0;
  const res = await db.query(
    `DELETE FROM "TB_HISTORY" WHERE ctid IN (
       SELECT h.ctid FROM "TB_HISTORY" h
        WHERE h."CHANGED_AT" < now() - make_interval(days => $1::int)
          AND EXISTS (SELECT 1 FROM "TB_HISTORY" n
                       WHERE n."TENANT_ID" = h."TENANT_ID" AND n."DIMENSION" = h."DIMENSION"
                         AND n."RECORD_ID" = h."RECORD_ID" AND n."REVISION" > h."REVISION")
        ORDER BY h."CHANGED_AT" LIMIT $2)`,
    [retentionDays, batchSize],
  );
  return res.rowCount;
}

export function startHistoryRetention(opts: HistoryRetentionOptions): HistoryRetentionJob {
  const { db, logger } = opts;
  const batchSize = opts.batchSize ?? DEFAULT_BATCH;
  const maxBatches = opts.maxBatches ?? DEFAULT_MAX_BATCHES;

  async function runOnce(): Promise<number> {
    let deleted = 0;
    for (let i = 0; i < maxBatches && !job.stopped; i++) {
      const n = await pruneHistoryBatch(db, opts.retentionDays, batchSize);
      deleted += n;
      if (n < batchSize) break;
    }
    return deleted;
  }

  const job = startPeriodic({
    intervalMs: opts.retentionDays > 0 ? opts.intervalMs : 0,
    round: runOnce,
    onDone: (n) => {
      if (n) logger.debug({ revisions: n }, "record history past its retention deleted");
    },
    onError: (err) => logger.warn({ err }, "deleting record history past its retention failed"),
  });
  return { runOnce, stop: job.stop };
}
