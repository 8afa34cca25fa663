// The composition root's first half: opens what the service depends on (database, Prisma,
// metadata) and hands it out explicitly. No module opens anything at import time.
import { mkdir } from "node:fs/promises";
import { type DatabaseHandle, openPglite, openPostgres } from "./db/database.ts";
import { migrate } from "./db/migrate.ts";
import { createPrisma, type PrismaClient } from "./db/prisma.ts";
import { createLogger, type Logger } from "./logger.ts";
import { createMetadataRegistry, type MetadataRegistry } from "./metadata/registry.ts";
import type { Config, Queryable } from "./types.ts";

export interface Services {
  config: Config;
  logger: Logger;
  db: DatabaseHandle;
  /** Where reads go: the replica of DATABASE_READ_URL when set, else `db`. */
  readDb: Queryable;
  prisma: PrismaClient;
  metadata: MetadataRegistry;
  /** The clock every time-dependent rule reads (tokens, sessions, audit stamps); injectable in tests. */
  clock: () => Date;
  close(): Promise<void>;
}

export interface OpenServicesOptions {
  logger?: Logger;
  /** An already open database (tests); otherwise opened from config. */
  db?: DatabaseHandle;
  clock?: () => Date;
}

export async function openDatabase(config: Config): Promise<DatabaseHandle> {
  const timeouts = { statementTimeoutMs: config.statementTimeoutMs };
  if (config.databaseUrl) return openPostgres(config.databaseUrl, timeouts);
  await mkdir(config.dataDir, { recursive: true });
  return openPglite(`${config.dataDir}/pgdata`, { transactionTimeoutMs: config.statementTimeoutMs });
}

export async function openServices(config: Config, opts: OpenServicesOptions = {}): Promise<Services> {
  const logger = opts.logger ?? createLogger(config.logLevel);
  const db = opts.db ?? (await openDatabase(config));
  const replica = config.databaseReadUrl
    ? openPostgres(config.databaseReadUrl, { statementTimeoutMs: config.statementTimeoutMs })
    : null;
  const prisma = createPrisma(db);
  const metadata = createMetadataRegistry({ prisma, db });
  const closeAll = async () => {
    await metadata.stop();
    await prisma.$disconnect();
    await replica?.close();
    await db.close();
  };
  try {
    await migrate(db);
    await metadata.start();
  } catch (err) {
    await closeAll().catch(() => {});
    throw err;
  }
  let closed = false;
  return {
    config,
    logger,
    db,
    readDb: replica ?? db,
    prisma,
    metadata,
    clock: opts.clock ?? (() => new Date()),
    async close() {
      if (closed) return;
      closed = true;
      await closeAll();
    },
  };
}
