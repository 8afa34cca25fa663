// Prisma Client over the same database as the DatabaseHandle, through a driver adapter
// (no native engine). Prisma owns the fixed tables; dimension tables go through DatabaseHandle.
import { PrismaPg } from "@prisma/adapter-pg";
import { PrismaPGlite } from "pglite-prisma-adapter";
import { PrismaClient } from "../generated/prisma/client.ts";
import type { DatabaseHandle } from "./database.ts";

export type { PrismaClient };

export function createPrisma(db: DatabaseHandle): PrismaClient {
  const adapter =
    db.kind === "pglite"
      ? new PrismaPGlite(db.pglite)
      : new PrismaPg({ connectionString: db.connectionString, max: 5, application_name: "dimensio-prisma" });
  return new PrismaClient({ adapter });
}
