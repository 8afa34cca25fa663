// The event side of a process (issue 10): the relay, and the subscribers each on its own queue.
// ROLE=all runs everything; ROLE=relay the relay alone; ROLE=webhooks the consumers: the webhook
// dispatcher and its delivery worker, and the subscribers (search, analytics, media, notifications). Subscribers are attached before the relay starts publishing.
import type { Services } from "../services.ts";
import { createAnalyticsWriter } from "./analytics.ts";
import type { BatchHandler } from "./batching.ts";
import type { ReceivedEvent, Unsubscribe } from "./bus.ts";
import { createNotificationSender, logTransport, type NotificationTransport } from "./notifications.ts";
import { createRelay, type Relay } from "./relay.ts";
import { createSearchIndexer } from "./search.ts";
import { createMediaCollector } from "./media-gc.ts";
import { createDeliveryWorker, type DeliveryWorker } from "./webhooks/delivery.ts";
import { createWebhookDispatcher } from "./webhooks/dispatcher.ts";

/**
 * Events a batched subscriber takes at once (bus.subscribeBatches: the in-process bus's batch, the
 * AMQP prefetch): a burst of writes costs each subscriber a statement or a transaction per batch,
 * not one per event.
 */
const SUBSCRIBER_BATCH = 100;

export interface EventRuntimeOptions {
  relay?: boolean;
  webhooks?: boolean;
  /** Analytics writer, search indexer and notification sender. */
  subscribers?: boolean;
  notificationTransport?: NotificationTransport;
}

export interface EventRuntime {
  /** The main database's relay. */
  relay: Relay | null;
  /** One relay per database (null: the main's), each started once its database is ready. */
  relays: ReadonlyMap<string | null, Relay>;
  /** The main database's delivery worker. */
  deliveries: DeliveryWorker | null;
  stop(): Promise<void>;
}

/** How long a profile not ready at start waits before its relay and worker are tried again. */
const PROFILE_START_RETRY_MS = 2000;

/**
 * A batch handler per database: each batch is split by the database the events came from, and
 * each part goes to that database's handler (its deduplication, its tables; decisions.md §18).
 */
function byDatabase(make: (name: string | null) => BatchHandler): BatchHandler {
  const handlers = new Map<string | null, BatchHandler>();
  const handlerOf = (name: string | null) => {
    let h = handlers.get(name);
    if (!h) {
      h = make(name);
      handlers.set(name, h);
    }
    return h;
  };
  return async (events) => {
    const parts = new Map<string | null, ReceivedEvent[]>();
    for (const e of events) {
      const name = e.database ?? null;
      const part = parts.get(name);
      if (part) part.push(e);
      else parts.set(name, [e]);
    }
    for (const [name, part] of parts) await handlerOf(name)(part);
  };
}

export async function startEventRuntime(
  services: Services,
  opts: EventRuntimeOptions,
): Promise<EventRuntime> {
  const { bus, config, logger } = services;
  const subscriptions: Unsubscribe[] = [];
  const subscribeInBatches = (name: string, handler: BatchHandler) =>
    bus.subscribeBatches(name, handler, { maxBatch: SUBSCRIBER_BATCH });
  const workers = new Map<string | null, DeliveryWorker>();
  const relays = new Map<string | null, Relay>();
  const timers = new Set<NodeJS.Timeout>();
  let stopped = false;
  const stop = async () => {
    stopped = true;
    for (const t of timers) clearTimeout(t);
    await Promise.all([...relays.values()].map((r) => r.stop()));
    await Promise.all(subscriptions.map((u) => u()));
    await Promise.all([...workers.values()].map((w) => w.stop()));
  };
  const dbOf = (name: string | null) => services.atDatabase(name).db;
  const makeWorker = (name: string | null): DeliveryWorker => {
    const worker = createDeliveryWorker({
      db: dbOf(name),
      logger: name === null ? logger : logger.child({ profile: name }),
      retryBaseMs: config.webhookRetryBaseMs,
      allowPrivate: config.webhookAllowPrivate,
      concurrency: config.webhookConcurrency,
      concurrencyPerReceiver: config.webhookConcurrencyPerReceiver,
      concurrencyPerTenant: config.webhookConcurrencyPerTenant,
      pollMs: config.events.pollMs,
      onAttempt: (status) => services.metrics.webhookDeliveries.inc({ status }),
    });
    workers.set(name, worker);
    return worker;
  };
  const makeRelay = (name: string | null): Relay => {
    const relay = createRelay({
      db: dbOf(name),
      ...(name === null ? {} : { database: name }),
      bus,
      logger: name === null ? logger : logger.child({ profile: name }),
      batchSize: config.events.batchSize,
      pollMs: config.events.pollMs,
      gatherMs: config.events.gatherMs,
      retentionMs: config.events.retentionMs,
      onPublished: (events) => {
        const now = Date.now();
        services.metrics.eventsPublished.inc(events.length);
        for (const e of events) services.metrics.publishLatency.observe((now - e.timestamp.getTime()) / 1000);
      },
    });
    relays.set(name, relay);
    return relay;
  };
  /** A profile's relay and worker, started once it is ready (tried again until it is). */
  const startProfile = async (name: string): Promise<void> => {
    if (stopped) return;
    try {
      if (!(await services.profiles.prepare(name))) throw new Error(`database profile ${name} is not ready`);
      if (opts.webhooks && !workers.has(name)) makeWorker(name).start();
      if (opts.relay) await (relays.get(name) ?? makeRelay(name)).start();
    } catch (err) {
      if (stopped) return;
      logger.warn(
        { profile: name, err: err instanceof Error ? err.message : String(err) },
        "event side of a database profile not started; trying again",
      );
      const timer = setTimeout(() => {
        timers.delete(timer);
        void startProfile(name);
      }, PROFILE_START_RETRY_MS);
      timer.unref();
      timers.add(timer);
    }
  };
  try {
    if (opts.webhooks) {
      makeWorker(null).start();
      subscriptions.push(
        await subscribeInBatches(
          "webhooks",
          byDatabase((name) =>
            createWebhookDispatcher({
              db: dbOf(name),
              ...(name === null ? {} : { usersDb: services.db }),
              metadata: services.metadata,
              onQueued: () => workers.get(name)?.wake(),
            }),
          ),
        ),
      );
    }
    if (opts.subscribers) {
      subscriptions.push(
        await subscribeInBatches(
          "analytics",
          byDatabase((name) => createAnalyticsWriter(dbOf(name))),
        ),
      );
      subscriptions.push(
        await subscribeInBatches(
          "search",
          byDatabase((name) =>
            createSearchIndexer({
              db: dbOf(name),
              metadata: services.metadata,
              // Metadata events come from the main database; a rebuild covers every database.
              ...(name === null
                ? { databases: () => [dbOf(null), ...services.profiles.names.map(dbOf)] }
                : {}),
            }),
          ),
        ),
      );
      subscriptions.push(
        await bus.subscribe(
          "media-gc",
          createMediaCollector({ media: services.media, metadata: services.metadata, logger }),
          { concurrency: 2 },
        ),
      );
      const transport = opts.notificationTransport ?? logTransport(logger);
      subscriptions.push(
        await subscribeInBatches(
          "notifications",
          byDatabase((name) => createNotificationSender(dbOf(name), transport)),
        ),
      );
    }
    if (opts.relay) await makeRelay(null).start();
    if (opts.relay || opts.webhooks) for (const name of services.profiles.names) await startProfile(name);
  } catch (err) {
    await stop().catch(() => {});
    throw err;
  }
  return { relay: relays.get(null) ?? null, relays, deliveries: workers.get(null) ?? null, stop };
}

/** What a role runs of the event side. */
export function eventPartsOf(role: string): EventRuntimeOptions | null {
  switch (role) {
    case "all":
      return { relay: true, webhooks: true, subscribers: true };
    case "relay":
      return { relay: true };
    case "webhooks":
      // The event consumers: webhooks and the service's own subscribers (search, analytics, media,
      // notifications), which a split deployment would otherwise run nowhere.
      return { webhooks: true, subscribers: true };
    default:
      return null;
  }
}

/**
 * The warning a process gets whose relay publishes a shared PostgreSQL's outbox to its own
 * in-process bus (DATABASE_URL without AMQP_URL): fine alone, but beside other processes on that
 * database it takes their events, which then reach only its own subscribers (none on RabbitMQ,
 * none of the other processes' GraphQL subscriptions). Null when that cannot happen.
 */
export function inProcessBusWarning(config: {
  role: string;
  databaseUrl: string | null;
  amqpUrl: string | null;
}): string | null {
  if (!config.databaseUrl || config.amqpUrl || !eventPartsOf(config.role)?.relay) return null;
  return "events go to this process's in-process bus (AMQP_URL is not set): run one such process per database; with several processes on it, set AMQP_URL in each, or this one takes their events";
}
