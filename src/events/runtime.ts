// The event side of a process (issue 10): the relay, and the subscribers each on its own queue.
// ROLE=all runs everything; ROLE=relay the relay alone; ROLE=webhooks the webhook dispatcher and
// its delivery worker alone. Subscribers are attached before the relay starts publishing.
import type { Services } from "../services.ts";
import { createAnalyticsWriter } from "./analytics.ts";
import type { BatchHandler } from "./batching.ts";
import type { Unsubscribe } from "./bus.ts";
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
  relay: Relay | null;
  deliveries: DeliveryWorker | null;
  stop(): Promise<void>;
}

export async function startEventRuntime(
  services: Services,
  opts: EventRuntimeOptions,
): Promise<EventRuntime> {
  const { db, bus, config, logger } = services;
  const subscriptions: Unsubscribe[] = [];
  const subscribeInBatches = (name: string, handler: BatchHandler) =>
    bus.subscribeBatches(name, handler, { maxBatch: SUBSCRIBER_BATCH });
  let deliveries: DeliveryWorker | null = null;
  let relay: Relay | null = null;
  const stop = async () => {
    await relay?.stop();
    await Promise.all(subscriptions.map((u) => u()));
    await deliveries?.stop();
  };
  try {
    if (opts.webhooks) {
      const worker = createDeliveryWorker({
        db,
        logger,
        retryBaseMs: config.webhookRetryBaseMs,
        allowPrivate: config.webhookAllowPrivate,
        concurrency: config.webhookConcurrency,
        concurrencyPerReceiver: config.webhookConcurrencyPerReceiver,
        concurrencyPerTenant: config.webhookConcurrencyPerTenant,
        pollMs: config.events.pollMs,
        onAttempt: (status) => services.metrics.webhookDeliveries.inc({ status }),
      });
      deliveries = worker;
      worker.start();
      subscriptions.push(
        await subscribeInBatches(
          "webhooks",
          createWebhookDispatcher({ db, metadata: services.metadata, onQueued: worker.wake }),
        ),
      );
    }
    if (opts.subscribers) {
      subscriptions.push(await subscribeInBatches("analytics", createAnalyticsWriter(db)));
      subscriptions.push(
        await subscribeInBatches("search", createSearchIndexer({ db, metadata: services.metadata })),
      );
      subscriptions.push(
        await bus.subscribe(
          "media-gc",
          createMediaCollector({ media: services.media, metadata: services.metadata, logger }),
          { concurrency: 2 },
        ),
      );
      subscriptions.push(
        await subscribeInBatches(
          "notifications",
          createNotificationSender(db, opts.notificationTransport ?? logTransport(logger)),
        ),
      );
    }
    if (opts.relay) {
      relay = createRelay({
        db,
        bus,
        logger,
        batchSize: config.events.batchSize,
        pollMs: config.events.pollMs,
        gatherMs: config.events.gatherMs,
        retentionMs: config.events.retentionMs,
        onPublished: (events) => {
          const now = Date.now();
          services.metrics.eventsPublished.inc(events.length);
          for (const e of events)
            services.metrics.publishLatency.observe((now - e.timestamp.getTime()) / 1000);
        },
      });
      await relay.start();
    }
  } catch (err) {
    await stop().catch(() => {});
    throw err;
  }
  return { relay, deliveries, stop };
}

/** What a role runs of the event side. */
export function eventPartsOf(role: string): EventRuntimeOptions | null {
  switch (role) {
    case "all":
      return { relay: true, webhooks: true, subscribers: true };
    case "relay":
      return { relay: true };
    case "webhooks":
      return { webhooks: true };
    default:
      return null;
  }
}
