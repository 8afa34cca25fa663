// The composition root's first half: opens what the service depends on (database, Prisma,
// metadata) and hands it out explicitly. No module opens anything at import time.
import { mkdir } from "node:fs/promises";
import { ConfigError } from "./config.ts";
import { type DatabaseHandle, type OpenOptions, openPglite, openPostgres } from "./db/database.ts";
import { migrate } from "./db/migrate.ts";
import { createDatabaseProfiles, type DatabaseProfiles } from "./db/profiles.ts";
import { syncTables } from "./ddl/sync.ts";
import { type DatabaseParts, lateTotals, tenantViews } from "./tenant-databases.ts";
import { type ReadRouting, readReplicaRouting } from "./db/read-replica.ts";
import { type PrismaClient, prismaFactory } from "./db/prisma.ts";
import { createAmqpBus } from "./events/amqp-bus.ts";
import { createMemoryBus, type EventBus } from "./events/bus.ts";
import { createEventFeed, type EventFeed } from "./events/feed.ts";
import { createLogger, type Logger } from "./logger.ts";
import { type CommandRegistry, createCommandRegistry } from "./resolvers/write/commands.ts";
import { type CreateGroups, createGroups } from "./resolvers/write/create-groups.ts";
import { guardMediaStore } from "./media/guarded.ts";
import { createLocalStore } from "./media/local-store.ts";
import { createS3Store } from "./media/s3-store.ts";
import type { MediaStore } from "./media/store.ts";
import { createMetrics, type Metrics } from "./observability/metrics.ts";
import { createMetadataRegistry, type MetadataRegistry } from "./metadata/registry.ts";
import { createTotalsCache, type TotalsCache } from "./resolvers/read/totals-cache.ts";
import type { Config, Queryable } from "./types.ts";

export interface Services {
  config: Config;
  logger: Logger;
  /**
   * The database of this services object: the main (metadata, tenants, users, sessions, and the
   * records of tenants without a profile) on the object openServices returns; a profile's on the
   * views `forTenant` and `atDatabase` give (decisions.md §18).
   */
  db: DatabaseHandle;
  /** The profile `db` is, null for the main database. */
  database: string | null;
  /** The database profiles (DATABASE_URL_<NAME>), their handles and the tenant → profile map. */
  profiles: DatabaseProfiles;
  /**
   * These services on the tenant's database (records, outbox, webhooks, search, analytics,
   * history, totals, group commit); 503 DATABASE_UNAVAILABLE while its profile is unreachable,
   * writes refused with 503 TENANT_MOVING while tenant:move moves it. The main's `db` stays where
   * metadata, users and sessions are read and written.
   */
  forTenant(tenantId: string): Services;
  /** These services on database `name` (null: the main): the event side's per-database work. */
  atDatabase(name: string | null): Services;
  /**
   * Where reads go: the replica of DATABASE_READ_URL when set (the primary while the replica is
   * unreachable; src/db/read-replica.ts), else `db`.
   */
  readDb: Queryable;
  /** Totals and counts kept until a write commits (COUNT_CACHE_MS). */
  totals: TotalsCache;
  /** The replica's routing and state (/healthz's `database_read`); null without DATABASE_READ_URL. */
  readReplica: ReadRouting | null;
  prisma: PrismaClient;
  metadata: MetadataRegistry;
  /** Where the relay publishes and subscribers read: RabbitMQ with AMQP_URL, else in-process. */
  bus: EventBus;
  /** This process's live feed of the bus (GraphQL subscriptions). */
  feed: EventFeed;
  /** This process's Prometheus registry and instruments (GET /metrics). */
  metrics: Metrics;
  /** Where media bytes live: S3 with S3_ENDPOINT/S3_BUCKET, else DATA_DIR/media. */
  media: MediaStore;
  /** Named operations per dimension (decisions.md §15): built-ins plus what the code registers. */
  commands: CommandRegistry;
  /**
   * The group commit of creates on PostgreSQL (src/resolvers/write/create-groups.ts): creates of
   * one shape that wait while one is written go together in one statement. Null on PGlite (one
   * connection: one statement at a time anyway) and with CREATE_GROUP_MAX_ROWS=1.
   */
  creates: CreateGroups | null;
  /** The clock every time-dependent rule reads (tokens, sessions, audit stamps); injectable in tests. */
  clock: () => Date;
  close(): Promise<void>;
}

/**
 * How long a group-commit statement out holds its shape's turn: statements take a few ms; one
 * that waits longer (a lock) lets the next group go rather than hold every create of its shape.
 */
const CREATE_GROUP_SLOT_MS = 10;

export interface OpenServicesOptions {
  logger?: Logger;
  /** An already open database (tests); otherwise opened from config. */
  db?: DatabaseHandle;
  clock?: () => Date;
  /** Commands registered by the embedding code (built-ins are always there). */
  commands?: CommandRegistry;
}

/** The pool options of config; connections the database breaks off are logged (docs/faults.md). */
function postgresOptions(config: Config, logger: Logger | null): OpenOptions {
  return {
    statementTimeoutMs: config.statementTimeoutMs,
    connectTimeoutMs: config.databaseConnectTimeoutMs,
    watchdogMs: config.databaseWatchdogMs,
    poolMode: config.databasePoolMode,
    ...(config.databaseListenUrl ? { listenUrl: config.databaseListenUrl } : {}),
    ...(logger
      ? {
          onConnectionError: (err: Error, which: string) =>
            logger.warn({ err: err.message, connection: which }, "database connection lost"),
          onWatchdog: (event) =>
            event.state === "down"
              ? logger.error(
                  { reason: event.reason },
                  "database not answering: its connections given up, requests answered 503",
                )
              : logger.warn("database answering again"),
        }
      : {}),
  };
}

function prismaOptions(config: Config, logger: Logger) {
  return {
    connectTimeoutMs: config.databaseConnectTimeoutMs,
    onConnectionError: (err: Error) =>
      logger.warn({ err: err.message, connection: "prisma" }, "database connection lost"),
  };
}

export async function openDatabase(config: Config, logger: Logger | null = null): Promise<DatabaseHandle> {
  if (config.databaseUrl) return openPostgres(config.databaseUrl, postgresOptions(config, logger));
  await mkdir(config.dataDir, { recursive: true });
  return openPglite(`${config.dataDir}/pgdata`, { transactionTimeoutMs: config.statementTimeoutMs });
}

/** The media store of the config, its failures typed as 503 MEDIA_STORE_UNAVAILABLE (guarded.ts). */
export async function openMediaStore(config: Config, logger: Logger): Promise<MediaStore> {
  return guardMediaStore(await openRawMediaStore(config), logger);
}

async function openRawMediaStore(config: Config): Promise<MediaStore> {
  const { s3 } = config;
  if (s3.bucket) {
    return createS3Store({
      endpoint: s3.endpoint,
      bucket: s3.bucket,
      region: s3.region,
      accessKeyId: s3.accessKeyId,
      secretAccessKey: s3.secretAccessKey,
      forcePathStyle: s3.forcePathStyle,
    });
  }
  return createLocalStore(`${config.dataDir}/media`);
}

/** A bus made on its first use (a listener of its connection counts as a use). */
function lazyBus(kind: EventBus["kind"], make: () => EventBus): EventBus {
  let bus: EventBus | null = null;
  const opened = () => {
    bus ??= make();
    return bus;
  };
  return {
    kind,
    publish: (events) => opened().publish(events),
    subscribe: (name, handler, opts) => opened().subscribe(name, handler, opts),
    subscribeBatches: (name, handler, opts) => opened().subscribeBatches(name, handler, opts),
    isConnected: () => bus?.isConnected() ?? false,
    onConnect: (listener) => opened().onConnect(listener),
    async close() {
      if (bus) await bus.close();
    },
    dependencyState: () => (bus === null ? "idle" : bus.isConnected() ? "up" : "down"),
  };
}

export function openBus(config: Config, logger: Logger): EventBus {
  const { maxFailures } = config.events;
  // The broker connection opens on the first publish or subscription: the auth backend never
  // makes one, the read and write backends only with a GraphQL subscription.
  const { amqpUrl } = config;
  if (amqpUrl && config.role !== "auth")
    return lazyBus("amqp", () =>
      createAmqpBus({ url: amqpUrl, exchange: config.eventsExchange, maxFailures, logger }),
    );
  return createMemoryBus({
    maxFailures,
    maxQueued: config.events.memoryQueueMax,
    onError: (queue, event, err) =>
      logger.warn(
        { err, subscriber: queue, event_id: event.id, attempt: event.attempt },
        "subscriber failed",
      ),
    onDeadLetter: (queue, event) =>
      logger.error(
        { subscriber: queue, event_id: event.id },
        "subscriber gave up on a message (dead-lettered)",
      ),
  });
}

export async function openServices(config: Config, opts: OpenServicesOptions = {}): Promise<Services> {
  const logger = opts.logger ?? createLogger(config.logLevel);
  if (Object.keys(config.databaseProfiles).length > 0 && !config.databaseUrl && !opts.db)
    throw new ConfigError([
      "DATABASE_URL: required when database profiles (DATABASE_URL_<NAME>) are set (the embedded database cannot hold their metadata)",
    ]);
  const db = opts.db ?? (await openDatabase(config, logger));
  const replica = config.databaseReadUrl
    ? openPostgres(config.databaseReadUrl, postgresOptions(config, logger))
    : null;
  const metrics = createMetrics({ db, role: config.role });
  const readReplica = replica
    ? readReplicaRouting({
        replica,
        primary: db,
        onDown: (err) =>
          logger.warn(
            { err: err instanceof Error ? err.message : String(err) },
            "read replica unreachable; reads go to the primary until it answers",
          ),
        onUp: () => logger.warn("read replica answering again; reads go back to it"),
        onFallback: () => metrics.readReplicaFallbacks.inc(),
      })
    : null;
  // Prisma's engine (about 45 MB once it ran a query, and a pool of its own) is made on first use:
  // the registration of webhooks, fixture imports, the demo's first load.
  let prisma: PrismaClient | null = null;
  const createPrisma = await prismaFactory(db, prismaOptions(config, logger));
  const metadata = createMetadataRegistry({ db });
  const bus = openBus(config, logger);
  const feed = createEventFeed(bus, logger);
  let totals: TotalsCache | null = null;
  const prismaFactories = new Map<string, () => PrismaClient>();
  const profiles = createDatabaseProfiles({
    main: db,
    profiles: config.databaseProfiles,
    // The main's options, but LISTEN on the profile's own database (DATABASE_LISTEN_URL_<NAME>).
    open: (url, name) => {
      const { listenUrl: _main, ...options } = postgresOptions(config, logger);
      const listenUrl = config.databaseProfiles[name]?.listenUrl;
      return openPostgres(url, listenUrl ? { ...options, listenUrl } : options);
    },
    logger,
    // A profile is readied as the main is at start: migrations, then its tables as the metadata
    // describes them; Prisma's factory for its webhooks.
    async prepare(name, handle) {
      await migrate(handle);
      await handle.transaction(async (tx) => {
        await syncTables(tx, metadata.current().dimensions.values());
      });
      prismaFactories.set(
        name,
        await prismaFactory(handle, { ...prismaOptions(config, logger), profile: name }),
      );
    },
  });
  let views: ReturnType<typeof tenantViews<Services>> | null = null;
  const closeAll = async () => {
    for (const part of views?.made() ?? []) {
      await part.totals.stop();
      await (part as DatabaseParts & { closePrisma?: () => Promise<void> }).closePrisma?.();
    }
    await profiles.close();
    await totals?.stop();
    await feed.close();
    await bus.close();
    await metadata.stop();
    await prisma?.$disconnect();
    readReplica?.stop();
    await replica?.close();
    await db.close();
  };
  let media: MediaStore;
  try {
    await migrate(db);
    await metadata.start();
    await profiles.start();
    media = await openMediaStore(config, logger);
    totals = await createTotalsCache(db, { ttlMs: config.countCacheMs });
  } catch (err) {
    await closeAll().catch(() => {});
    throw err;
  }
  let closed = false;
  const groupCommit = (handle: DatabaseHandle) =>
    handle.kind === "postgres" && config.createGroupMaxRows > 1
      ? createGroups({ maxRows: config.createGroupMaxRows, slotMs: CREATE_GROUP_SLOT_MS })
      : null;
  /** A profile's parts, made at its first use (readied by then: forTenant asks profileFor first). */
  const profileParts = (name: string): DatabaseParts => {
    const handle = profiles.handle(name);
    let client: PrismaClient | null = null;
    const readConfig = config.databaseProfiles[name]?.readUrl;
    const parts: DatabaseParts & { closePrisma(): Promise<void> } = {
      database: name,
      db: handle,
      readDb: readConfig
        ? readReplicaRouting({
            replica: profiles.readHandle(name),
            primary: handle,
            onDown: () => logger.warn({ profile: name }, "read replica of a profile unreachable"),
            onUp: () => logger.warn({ profile: name }, "read replica of a profile answering again"),
            onFallback: () => metrics.readReplicaFallbacks.inc(),
          }).readDb
        : handle,
      totals: lateTotals(
        () => createTotalsCache(handle, { ttlMs: config.countCacheMs }),
        (err) =>
          logger.warn(
            { profile: name, err: err instanceof Error ? err.message : String(err) },
            "totals cache off",
          ),
      ),
      creates: groupCommit(handle),
      get prisma() {
        if (client) return client;
        const make = prismaFactories.get(name);
        if (!make) throw new Error(`database profile ${name} is not ready`);
        client = make();
        return client;
      },
      async closePrisma() {
        await client?.$disconnect();
      },
    };
    return parts;
  };
  const services: Services = {
    config,
    logger,
    db,
    database: null,
    profiles,
    // A copy of these services (tests spread them with another config) stays itself for the main.
    forTenant(this: Services, tenantId: string) {
      const view = views!.forTenant(tenantId);
      return view === services ? this : view;
    },
    atDatabase(this: Services, name: string | null) {
      return name === null ? this : views!.atDatabase(name);
    },
    readDb: readReplica?.readDb ?? db,
    readReplica,
    totals,
    get prisma() {
      prisma ??= createPrisma();
      return prisma;
    },
    metadata,
    bus,
    feed,
    commands: opts.commands ?? createCommandRegistry(),
    creates: groupCommit(db),
    media,
    metrics,
    clock: opts.clock ?? (() => new Date()),
    async close() {
      if (closed) return;
      closed = true;
      await closeAll();
    },
  };
  views = tenantViews(services, profiles, profileParts);
  return services;
}
