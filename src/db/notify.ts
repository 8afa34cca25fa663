// Waking the listeners of committed transactions' channels (PostgreSQL): this process's at once,
// other processes' through NOTIFY, folded so that a busy database is not woken once per commit.
import type pg from "pg";
import { addNoticeItems, type NoticeItems, noticePayload } from "./notice.ts";

/** The longest a NOTIFY of a committed transaction waits to be folded with the next ones. */
export const NOTIFY_FOLD_MS = 5;

/**
 * The longest a NOTIFY owed to folded commits waits for a committing transaction to carry it
 * before it goes out as a statement of its own (a transaction of its own).
 */
export const NOTIFY_OWED_MS = 50;

/**
 * Wakes the listeners of committed transactions' channels: this process's own at once (no round
 * trip), other processes' through NOTIFY, at most one per channel every NOTIFY_FOLD_MS: each NOTIFY
 * wakes every listening connection of the database, so one per commit would cost PostgreSQL more
 * than the writes that asked for them. A NOTIFY goes inside a committing transaction, pipelined
 * with its COMMIT (no transaction of its own), when none went out in the last NOTIFY_FOLD_MS.
 * Commits in between are owed one: the next committing transaction carries it, or, when none
 * comes within NOTIFY_OWED_MS, a statement of its own. A NOTIFY's payload names the items of every
 * commit it covers (src/db/notice.ts): its own transaction's and those folded into it.
 */
export function committedNotifier(pool: pg.Pool, tellLocal: (channel: string, payload: string) => void) {
  interface Window {
    timer: NodeJS.Timeout;
    /** The items of the commits in the window: a NOTIFY naming them is owed once it ends. */
    again: NoticeItems | null;
    /** The window ended owing one: the next commit carries it. */
    owed: boolean;
  }
  const windows = new Map<string, Window>();
  const schedule = (channel: string, w: Window, ms: number) => {
    w.timer = setTimeout(() => end(channel, w), ms);
    w.timer.unref();
  };
  /**
   * A NOTIFY of `channel` goes out now: the next NOTIFY_FOLD_MS are folded into the next one.
   * Answers the items of the commits folded into the window it ends (the NOTIFY names them).
   */
  const open = (channel: string): NoticeItems | null => {
    const old = windows.get(channel);
    if (old) clearTimeout(old.timer);
    const w: Window = { timer: undefined as unknown as NodeJS.Timeout, again: null, owed: false };
    schedule(channel, w, NOTIFY_FOLD_MS);
    windows.set(channel, w);
    return old?.again ?? null;
  };
  const send = (channel: string, items: NoticeItems | null) => {
    const payload = noticePayload(addNoticeItems(open(channel), items) ?? "all");
    pool.query("SELECT pg_notify($1, $2)", [channel, payload]).catch(() => {}); // the relays' poll covers a lost one
  };
  function end(channel: string, w: Window) {
    if (w.owed) return send(channel, null); // no commit carried it
    if (!w.again) {
      windows.delete(channel);
      return;
    }
    w.owed = true;
    schedule(channel, w, NOTIFY_OWED_MS);
  }
  return {
    /**
     * Before a transaction that changed `items` commits: what the NOTIFY of `channel` that is to
     * go out with it names (none went out in the last NOTIFY_FOLD_MS, or one is owed): its items
     * and those of the commits folded into it. Null when the current window's end will see to it.
     */
    claim(channel: string, items: NoticeItems): NoticeItems | null {
      const w = windows.get(channel);
      if (w && !w.owed) {
        w.again = addNoticeItems(w.again, items);
        return null;
      }
      return addNoticeItems(open(channel), items) ?? "all";
    },
    /** A transaction that claimed `named` of `channel` rolled back: they go out on their own. */
    unclaim(channel: string, named: NoticeItems) {
      send(channel, named);
    },
    /** After the commit of a transaction that changed `items`: this process's listeners. */
    committed(channel: string, items: NoticeItems) {
      tellLocal(channel, noticePayload(items));
    },
    stop() {
      for (const w of windows.values()) clearTimeout(w.timer);
      windows.clear();
    },
  };
}

export type CommittedNotifier = ReturnType<typeof committedNotifier>;
