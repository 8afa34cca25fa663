// Prisma Client over the same database as the DatabaseHandle, through a driver adapter
// (no native engine). Prisma owns the fixed tables; dimension tables go through DatabaseHandle.
// The adapter of the handle's kind is imported when the factory is made, so a service on
// PostgreSQL does not load PGlite's.
import pg from "pg";
import { PrismaClient } from "../generated/prisma/client.ts";
import { type DatabaseHandle, DEFAULT_CONNECT_TIMEOUT_MS } from "./database.ts";

export type { PrismaClient };

export interface PrismaOptions {
  /** PostgreSQL: the longest wait for a connection (DATABASE_CONNECT_TIMEOUT_MS). */
  connectTimeoutMs?: number;
  /** PostgreSQL: told when the database breaks off one of the adapter's connections (logged). */
  onConnectionError?: (err: Error) => void;
}

/**
 * Makes clients for `db` (each makes its engine and, on PostgreSQL, a small pool of its own). The
 * adapter listens for its connections' errors itself (idle and in a transaction); they are told to
 * `onConnectionError`, and a request meets its own as an error (503 DATABASE_UNAVAILABLE).
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
  const { connectionString } = db;
  const onError = (err: Error) => opts.onConnectionError?.(err);
  return () => {
    const pool = new pg.Pool({
      connectionString,
      max: 5,
      application_name: "dimensio-prisma",
      connectionTimeoutMillis: opts.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS,
      keepAlive: true,
    });
    // A server gone silent fails Prisma's requests within seconds too (src/db/watchdog.ts).
    db.watchPool(pool);
    return new PrismaClient({
      adapter: new PrismaPg(pool, {
        onPoolError: onError,
        onConnectionError: onError,
        // Ended with the client ($disconnect), as a pool of the adapter's own would be.
        disposeExternalPool: true,
      }),
    });
  };
}
