// Group commit of creates (issue 19): creates of one shape (tenant, dimension, columns, keys looked
// up) that arrive while a create of that shape is being written go to the database next, together,
// as one statement (a transaction of its own) instead of one statement and one commit each. Each
// create still writes its row and its outbox row atomically and is answered once they are
// committed; a group only shares the statement, its round trip and its commit. Nothing waits for a
// group to fill: the first create of a quiet spell goes at once, and what arrives while it is out
// goes next (so a group is never more than the creates that were waiting anyway).
//
// A shape has one statement out at a time, or more once the one out has taken longer than
// `slotMs` (a statement waiting on a lock, a slow connection): a create never waits behind a
// stuck one for longer than that.
//
// When the database refuses a group's statement (a key taken, a key naming no record, a value a
// column cannot hold: an error with its SQLSTATE, so nothing of it was written), or the statement
// was never sent (the first create's deadline had passed), each create of the group is written
// again on its own, and each gets exactly the answer it would have had alone.
// A group whose statement failed without the server's answer (the connection lost: whether it
// committed is unknown) is not written again: each of its creates fails with that error, as a
// create alone would.

import { answeredByServer } from "../../db/errors.ts";
import { ApiError } from "../../errors.ts";

/** One create waiting in a group: it can write itself alone, or the group through its transaction. */
export interface GroupedCreate<R> {
  /** Writes this create alone, on its own transaction. */
  alone(): Promise<R>;
  /** Writes `items` (this create first) in one statement on this create's transaction. */
  together(items: readonly this[]): Promise<R[]>;
}

export interface CreateGroups {
  /** Writes `item`, alone or with other creates of the same `shape`; resolves to its own result. */
  write<R>(shape: string, item: GroupedCreate<R>): Promise<R>;
}

export interface CreateGroupOptions {
  /** The most creates one statement writes. */
  maxRows: number;
  /** How long a statement out holds its shape's turn before the next group may go too. */
  slotMs: number;
}

interface Waiting<R> {
  item: GroupedCreate<R>;
  resolve: (result: R) => void;
  reject: (err: unknown) => void;
}

/**
 * A shape with a statement out: the creates that arrived meanwhile, and whether that statement
 * still holds the turn (not yet answered, not out longer than slotMs). A lane whose turn is free
 * and that has nobody waiting is forgotten, even with a statement past slotMs still out.
 */
interface Lane {
  waiting: Waiting<unknown>[];
  busy: boolean;
}

/**
 * Whether a group's statement is known to have written nothing: the server refused it (its error
 * carries a SQLSTATE, five characters; a socket's error code such as ECONNRESET is not one), or it
 * was never sent (an API error the database handle throws first, such as the deadline's).
 */
function wroteNothing(err: unknown): boolean {
  return err instanceof ApiError || answeredByServer(err);
}

export function createGroups(opts: CreateGroupOptions): CreateGroups {
  const lanes = new Map<string, Lane>();

  /** Settles `w` with its create written alone. */
  const writeAlone = (w: Waiting<unknown>): Promise<void> => w.item.alone().then(w.resolve, w.reject);

  async function writeGroup(group: Waiting<unknown>[]): Promise<void> {
    if (group.length === 1) return writeAlone(group[0]!);
    let results: unknown[];
    try {
      results = await group[0]!.item.together(group.map((w) => w.item));
    } catch (err) {
      if (!wroteNothing(err)) {
        for (const w of group) w.reject(err);
        return;
      }
      // Written again one by one, each on its own transaction, all at once.
      await Promise.all(group.map(writeAlone));
      return;
    }
    for (const [i, w] of group.entries()) w.resolve(results[i]);
  }

  /** Sends the lane's waiting creates while the turn is free; forgets the lane once idle. */
  function pump(shape: string, lane: Lane): void {
    if (!lane.busy && lane.waiting.length > 0) {
      const group = lane.waiting.splice(0, opts.maxRows);
      lane.busy = true;
      let held = true;
      const release = () => {
        if (!held) return;
        held = false;
        lane.busy = false;
        pump(shape, lane);
      };
      const timer = setTimeout(release, opts.slotMs);
      void writeGroup(group).finally(() => {
        clearTimeout(timer);
        release();
      });
    }
    if (!lane.busy && lane.waiting.length === 0 && lanes.get(shape) === lane) lanes.delete(shape);
  }

  return {
    write<R>(shape: string, item: GroupedCreate<R>): Promise<R> {
      let lane = lanes.get(shape);
      if (!lane) {
        lane = { waiting: [], busy: false };
        lanes.set(shape, lane);
      }
      const written = new Promise<R>((resolve, reject) => {
        lane.waiting.push({ item, resolve, reject } as Waiting<unknown>);
      });
      pump(shape, lane);
      return written;
    },
  };
}
