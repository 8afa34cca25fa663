// Totals kept until something is written to what they count (issue 19: W1's page with its total,
// W5's count). A list's total and a count are the same statement for every page of the same
// filter: a client paging through 5,000 matching records in pages of 20 asks it 250 times, and on
// a read-mostly dimension its answer changes only when a write to that dimension commits. So each
// process keeps the totals it counted, keyed by the count's own SQL and parameters (tenant,
// filter, access rules and metadata version are all in them) with the tenant and dimension they
// count (the caller's CountScope), and forgets those of a tenant's
// dimension when a write to that dimension of that tenant commits (a count reads its dimension's
// table alone, for its tenant: src/query/compile.ts, fromWhere):
// - in this process, at once, as the write's transaction commits (before its response);
// - in other processes, when the outbox's NOTIFY arrives (milliseconds, folded under load);
// - everywhere after `ttlMs` at most: the bound for what neither announces (SQL typed by hand, a
//   read replica that had not yet replayed a write when the total was counted).
// Each outbox row's notice names its tenant and dimension (outboxNoticeItem), cascaded changes'
// rows included; a notice that names none (too many to name, or the connection back after a loss)
// forgets every total. While the listening connection is lost, nothing is kept (a notice may be
// missed). A count that ran while a write to its dimension committed is not kept. Totals of a
// full-text search are never kept: the search index is updated after the write, by its
// subscriber (src/events/search.ts).
import { LRUCache } from "lru-cache";
import { OUTBOX_CHANNEL, outboxNoticeItem, outboxNoticeItems } from "../../events/outbox.ts";
import type { CountScope } from "../../query/types.ts";
import type { Database } from "../../types.ts";

export interface CachedTotal {
  readonly total: number;
  /** The planner's estimate rather than a count (decisions §11). */
  readonly estimated: boolean;
}

export interface TotalsCache {
  /** The total kept under `key`, if any. */
  get(key: string): CachedTotal | undefined;
  /** A mark to pass to `set`: a total counted across a commit to its dimension is not kept. */
  mark(): number;
  /**
   * Keeps `total` under `key` unless a write to `scope` committed since `mark`; without a scope,
   * unless anything was written since, and it goes with any write.
   */
  set(key: string, total: CachedTotal, mark: number, scope?: CountScope): void;
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

/** The scope of a key whose tenant and dimension are not known: forgotten on any write. */
const UNKNOWN_SCOPE = "";

/** Written-to scopes remembered for `set`'s check at most; past it, everything is forgotten. */
const MAX_SCOPES_WRITTEN = 10_000;

interface Kept {
  readonly total: CachedTotal;
  readonly scope: string;
}

export async function createTotalsCache(db: Database, options: TotalsCacheOptions): Promise<TotalsCache> {
  if (options.ttlMs <= 0) return NO_TOTALS_CACHE;
  /** The keys kept per scope, for forgetting a scope's; kept in step by the LRU's dispose. */
  const keysOf = new Map<string, Set<string>>();
  const entries = new LRUCache<string, Kept>({
    maxSize: options.maxKeyBytes ?? 8 * 1024 * 1024,
    sizeCalculation: (_value, key) => key.length + 32,
    ttl: options.ttlMs,
    dispose(kept, key) {
      const keys = keysOf.get(kept.scope);
      keys?.delete(key);
      if (keys?.size === 0) keysOf.delete(kept.scope);
    },
  });
  // Forgetting moves `generation`; `set` keeps a total only when neither everything nor its scope
  // was forgotten after its mark.
  let generation = 0;
  let allForgottenAt = 0;
  const scopeForgottenAt = new Map<string, number>();
  let listening = true;
  const forgetAll = () => {
    allForgottenAt = ++generation;
    scopeForgottenAt.clear();
    entries.clear();
    keysOf.clear();
  };
  const forgetScope = (scope: string) => {
    scopeForgottenAt.set(scope, ++generation);
    for (const key of [...(keysOf.get(scope) ?? [])]) entries.delete(key);
  };
  const forget = (payload: string) => {
    const scopes = outboxNoticeItems(payload);
    if (!scopes || scopeForgottenAt.size + scopes.length > MAX_SCOPES_WRITTEN) return forgetAll();
    for (const scope of scopes) forgetScope(scope);
    forgetScope(UNKNOWN_SCOPE);
  };
  // A notice on the channel is a committed write (this process's own, told even while the
  // listening connection is lost) or, once it is back, notices that may have been missed (an
  // empty payload: everything).
  const unlisten = await db.listen(OUTBOX_CHANNEL, forget, {
    onLost() {
      listening = false;
      forgetAll();
    },
    onBack() {
      listening = true;
    },
  });
  return {
    get: (key) => (listening ? entries.get(key)?.total : undefined),
    mark: () => generation,
    set(key, total, mark, counted) {
      if (!listening || allForgottenAt > mark) return;
      const scope = counted ? outboxNoticeItem(counted.tenantId, counted.dim) : UNKNOWN_SCOPE;
      // A key of no known scope: kept only when nothing at all was forgotten since.
      const forgottenAt = scope === UNKNOWN_SCOPE ? generation : (scopeForgottenAt.get(scope) ?? 0);
      if (forgottenAt > mark) return;
      entries.set(key, { total, scope });
      if (!entries.has(key)) return; // a key past maxKeyBytes on its own is not kept
      const keys = keysOf.get(scope) ?? new Set<string>();
      keysOf.set(scope, keys);
      keys.add(key);
    },
    size: () => entries.size,
    async stop() {
      listening = false;
      forgetAll();
      await unlisten();
    },
  };
}
