// Prisma Client over the same database as the DatabaseHandle, through a driver adapter
// (no native engine). Prisma owns the fixed tables; dimension tables go through DatabaseHandle.
// The adapter of the handle's kind is imported when the factory is made, so a service on
// PostgreSQL does not load PGlite's.
import { PrismaClient } from "../generated/prisma/client.ts";
import type { DatabaseHandle } from "./database.ts";

export type { PrismaClient };

/** Makes clients for `db` (each makes its engine and, on PostgreSQL, a small pool of its own). */
export async function prismaFactory(db: DatabaseHandle): Promise<() => PrismaClient> {
  if (db.kind === "pglite") {
    const { PrismaPGlite } = await import("pglite-prisma-adapter");
    return () => new PrismaClient({ adapter: new PrismaPGlite(db.pglite) });
  }
  const { PrismaPg } = await import("@prisma/adapter-pg");
  const { connectionString } = db;
  return () =>
    new PrismaClient({
      adapter: new PrismaPg({ connectionString, max: 5, application_name: "dimensio-prisma" }),
    });
}
