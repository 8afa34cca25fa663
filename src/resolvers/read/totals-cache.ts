// Totals kept until something is written (issue 19: W1's page with its total, W5's count). A list's
// total and a count are the same statement for every page of the same filter: a client paging
// through 5,000 matching records in pages of 20 asks it 250 times, and on a read-mostly dimension
// its answer changes only when a write commits. So each process keeps the totals it counted, keyed
// by the count's own SQL and parameters (tenant, filter, access rules and metadata version are all
// in them), and forgets every one of them when any write commits:
// - in this process, at once, as the write's transaction commits (before its response);
// - in other processes, when the outbox's NOTIFY arrives (milliseconds, folded under load);
// - everywhere after `ttlMs` at most: the bound for what neither announces (SQL typed by hand, a
//   read replica that had not yet replayed a write when the total was counted).
// While the listening connection is lost, nothing is kept (a notice may be missed). A count that
// ran while a write committed is not kept. Totals of a full-text search are never kept: the search
// index is updated after the write, by its subscriber (src/events/search.ts).
import { LRUCache } from "lru-cache";
import { OUTBOX_CHANNEL } from "../../events/outbox.ts";
import type { Database } from "../../types.ts";

export interface CachedTotal {
  readonly total: number;
  /** The planner's estimate rather than a count (decisions §11). */
  readonly estimated: boolean;
}

export interface TotalsCache {
  /** The total kept under `key`, if any. */
  get(key: string): CachedTotal | undefined;
  /** A mark to pass to `set`: a total counted across a commit is not kept. */
  mark(): number;
  /** Keeps `total` under `key` unless a write committed since `mark`. */
  set(key: string, total: CachedTotal, mark: number): void;
  /** Totals kept now (tests, metrics). */
  size(): number;
  stop(): Promise<void>;
}

export interface TotalsCacheOptions {
  /** How long a total is kept at most; 0 keeps none. */
  ttlMs: number;
  /** Bytes of keys kept at most (least recently used go first). */
  maxKeyBytes?: number;
}

/** A cache that keeps nothing (COUNT_CACHE_MS=0, and read contexts built without one). */
export const NO_TOTALS_CACHE: TotalsCache = {
  get: () => undefined,
  mark: () => 0,
  set: () => {},
  size: () => 0,
  stop: async () => {},
};

export async function createTotalsCache(db: Database, options: TotalsCacheOptions): Promise<TotalsCache> {
  if (options.ttlMs <= 0) return NO_TOTALS_CACHE;
  const entries = new LRUCache<string, CachedTotal>({
    maxSize: options.maxKeyBytes ?? 8 * 1024 * 1024,
    sizeCalculation: (_value, key) => key.length + 32,
    ttl: options.ttlMs,
  });
  let generation = 0;
  let listening = true;
  const forgetAll = () => {
    generation++;
    entries.clear();
  };
  // Any notice on the channel is a committed write (this process's own, told even while the
  // listening connection is lost) or, once it is back, notices that may have been missed.
  const unlisten = await db.listen(OUTBOX_CHANNEL, forgetAll, {
    onLost() {
      listening = false;
      forgetAll();
    },
    onBack() {
      listening = true;
    },
  });
  return {
    get: (key) => (listening ? entries.get(key) : undefined),
    mark: () => generation,
    set(key, total, mark) {
      if (listening && mark === generation) entries.set(key, total);
    },
    size: () => entries.size,
    async stop() {
      listening = false;
      forgetAll();
      await unlisten();
    },
  };
}
