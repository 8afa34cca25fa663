// A metadata change reaches every database's tables, or none (decisions.md §18): the main
// database's transaction runs inside one open transaction per database profile, each of which
// syncs its tables to the new metadata. A profile that is not ready (unreachable) refuses the
// change before anything is written, naming the profile; a profile whose sync finds a problem (a
// column holding values of another type) refuses it as a whole, as the main's does. Commits go
// innermost first: the main's, then each profile's. A profile whose commit fails after the main's
// is readied again (its tables synced to the metadata as it now is) before its tenants are served.
import { type DatabaseProfiles, profileUnavailableError } from "../../db/profiles.ts";
import { isDatabaseUnavailable } from "../../db/errors.ts";
import type { DatabaseHandle } from "../../db/database.ts";
import type { Queryable } from "../../types.ts";

export interface ProfileTransaction {
  name: string;
  db: DatabaseHandle;
  tx: Queryable;
}

/** Readies every profile now, or refuses with 503 naming the first that cannot be reached. */
export async function requireEveryProfile(profiles: DatabaseProfiles): Promise<void> {
  for (const name of profiles.names) {
    if (profiles.state(name) === "ready") continue;
    if (!(await profiles.prepare(name))) throw refusedFor(name);
  }
}

function refusedFor(name: string, cause?: unknown) {
  const err = profileUnavailableError(name, cause);
  return Object.assign(err, {
    message: `The metadata change was refused: the database of profile ${name} is not reachable, and a change must reach every database's tables. Nothing was written; retry once it answers.`,
  });
}

/**
 * Runs `fn` with one open transaction per profile (in the order configured); `fn`'s own work
 * (the main's transaction) commits before them.
 */
export async function inEveryProfile<T>(
  profiles: DatabaseProfiles | undefined,
  fn: (txs: readonly ProfileTransaction[]) => Promise<T>,
): Promise<T> {
  const names = profiles?.names ?? [];
  const open: ProfileTransaction[] = [];
  let done: { value: T } | null = null;
  const step = async (i: number): Promise<T> => {
    if (i === names.length) {
      const value = await fn(open);
      done = { value };
      return value;
    }
    const name = names[i]!;
    const db = profiles!.handle(name);
    let inside = false;
    try {
      return await db.transaction(async (tx) => {
        inside = true;
        open.push({ name, db, tx });
        return step(i + 1);
      });
    } catch (err) {
      // The main's change committed, this profile's did not: it is readied again (synced to the
      // metadata as it now is) before its tenants are served.
      if (done) {
        profiles!.reset(name, err);
        return (done as { value: T }).value;
      }
      if (!inside && isDatabaseUnavailable(err)) throw refusedFor(name, err);
      throw err;
    }
  };
  return step(0);
}
