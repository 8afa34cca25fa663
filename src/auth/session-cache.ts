// The sessions this process verified, kept for a few seconds so that a request costs no session
// read (issue 11). The database announces every change that ends a session or changes what it may
// do, and every activity mark, on the channel "dimensio_sessions" (triggers of migrations 0006 and
// 0008): "d:<SESSION_ID>" (deleted), "s:<SESSION_ID>" (changed) or "u:<USER_ID>". An announcement
// evicts at once; a metadata change (menus shape the grants) or a
// lost listening connection empties the cache, and while the connection is lost nothing is kept.
import { LRUCache } from "lru-cache";
import type { Database } from "../types.ts";
import type { StoredSession } from "./sessions.ts";

export const SESSIONS_CHANNEL = "dimensio_sessions";

export interface SessionCache {
  /** The session, from the cache or (then kept) from `load`. */
  get(sessionId: string, load: () => Promise<StoredSession | null>): Promise<StoredSession | null>;
  /** Forgets one session here, now (this process's own revocations do not wait for the notice). */
  evict(sessionId: string): void;
  /** Forgets everything (metadata changed). */
  clear(): void;
  /**
   * Resolves once every process of the database, this one included, has been told every session
   * change committed before the call, so none keeps a session that change ended
   * (Database.listenersCaughtUp).
   */
  caughtUp(): Promise<void>;
  stop(): Promise<void>;
}

export interface SessionCacheOptions {
  /** How long a verified session is kept; 0 disables the cache. */
  ttlMs: number;
  max?: number;
}

export async function createSessionCache(db: Database, options: SessionCacheOptions): Promise<SessionCache> {
  const entries = new LRUCache<string, StoredSession>({
    max: options.max ?? 10_000,
    ttl: Math.max(options.ttlMs, 1),
  });
  // Bumped on every eviction: a load that started before it does not keep what it read.
  let generation = 0;
  // False while the listening connection is lost: notices may be missed, so nothing is kept.
  let listening = options.ttlMs > 0;

  function forgetAll() {
    generation++;
    entries.clear();
  }
  function onNotice(payload: string) {
    if (payload === "") {
      // Back after a loss (listening again is onBack's to say): what was missed is unknown.
      forgetAll();
      return;
    }
    generation++;
    if (payload.startsWith("s:") || payload.startsWith("d:")) {
      entries.delete(payload.slice(2));
    } else if (payload.startsWith("u:")) {
      const userId = payload.slice(2);
      for (const [id, s] of entries.entries()) if (s.userId === userId) entries.delete(id);
    } else {
      entries.clear();
    }
  }

  const unlisten =
    options.ttlMs > 0
      ? await db.listen(SESSIONS_CHANNEL, onNotice, {
          onLost() {
            listening = false;
            forgetAll();
          },
          onBack() {
            listening = true;
          },
        })
      : null;

  return {
    async get(sessionId, load) {
      if (!listening) return load();
      const hit = entries.get(sessionId);
      if (hit) return hit;
      const startedAt = generation;
      const session = await load();
      if (session && listening && generation === startedAt) entries.set(sessionId, session);
      return session;
    },
    evict(sessionId) {
      generation++;
      entries.delete(sessionId);
    },
    clear: forgetAll,
    caughtUp: () => db.listenersCaughtUp(),
    async stop() {
      forgetAll();
      listening = false;
      if (unlisten) await unlisten();
    },
  };
}
