// Prisma Client over the same database as the DatabaseHandle, through a driver adapter
// (no native engine). Prisma owns the fixed tables; dimension tables go through DatabaseHandle.
// On PostgreSQL the adapter runs on the handle's own pool (src/db/pool.ts): no second pool, so
// its statements are under the same watchdog (refused at once while the database is declared
// down, their connections given up with the others) and count against the same pool size.
// The adapter of the handle's kind is imported when the factory is made, so a service on
// PostgreSQL does not load PGlite's.
import { PrismaClient } from "../generated/prisma/client.ts";
import type { DatabaseHandle } from "./database.ts";
import { tagDatabaseProfile } from "./errors.ts";

export type { PrismaClient };

export interface PrismaOptions {
  /** PostgreSQL: told when the database breaks off a connection of a Prisma transaction (logged). */
  onConnectionError?: (err: Error) => void;
  /** Unused since Prisma runs on the handle's pool (its connect timeout applies); kept for callers. */
  connectTimeoutMs?: number;
  /**
   * The database profile `db` is (decisions.md §18): the clients' errors are tagged with it
   * (tagDatabaseProfile), so that a request meeting the profile's database gone through Prisma is
   * answered naming the profile, as through the handle (src/db/profiles.ts).
   */
  profile?: string;
}

/** `client` whose operations' errors are tagged with `profile`; its type stays PrismaClient's. */
function taggingErrors(client: PrismaClient, profile: string): PrismaClient {
  return client.$extends({
    query: {
      async $allOperations({ args, query }) {
        try {
          return await query(args);
        } catch (err) {
          tagDatabaseProfile(err, profile);
          throw err;
        }
      },
    },
  }) as unknown as PrismaClient;
}

/**
 * Makes clients for `db`. The adapter listens for its connections' errors itself (idle and in a
 * transaction); they are told to `onConnectionError`, and a request meets its own as an error
 * (503 DATABASE_UNAVAILABLE).
 */
export async function prismaFactory(
  db: DatabaseHandle,
  opts: PrismaOptions = {},
): Promise<() => PrismaClient> {
  if (db.kind === "pglite") {
    const { PrismaPGlite } = await import("pglite-prisma-adapter");
    return () => new PrismaClient({ adapter: new PrismaPGlite(db.pglite) });
  }
  const { PrismaPg } = await import("@prisma/adapter-pg");
  const onError = (err: Error) => opts.onConnectionError?.(err);
  const { profile } = opts;
  const make = () =>
    new PrismaClient({
      adapter: new PrismaPg(db.pool, {
        // (An idle connection lost is the pool's, told by the handle's onConnectionError.)
        onConnectionError: onError,
        // The pool is the handle's: it ends with the handle, not with this client.
        disposeExternalPool: false,
      }),
    });
  return profile === undefined ? make : () => taggingErrors(make(), profile);
}
