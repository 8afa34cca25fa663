// The live event feed of this process (GraphQL subscriptions): one non-durable bus subscription,
// opened when the first listener arrives and closed with the last, fanned out to the listeners.
// Redelivered messages are dropped by a bounded memory of recent message ids. The listeners of one
// event share a memo of what they make from it (the same view of it for the same visible fields:
// src/resolvers/read/events.ts), dropped once the event is fanned out.
import type { Logger } from "../logger.ts";
import { type EventBus, eventKey, type OutboxMessage, parseMessage, type Unsubscribe } from "./bus.ts";

/**
 * Told each event; `shared` is one map for every listener of this event, for what they would
 * otherwise each make from it alike.
 */
export type FeedListener = (message: OutboxMessage, shared: Map<string, unknown>) => void;

export interface EventFeed {
  listen(listener: FeedListener): Promise<() => Promise<void>>;
  close(): Promise<void>;
}

const RECENT_IDS = 10_000;

export function createEventFeed(bus: EventBus, logger: Logger): EventFeed {
  const listeners = new Set<FeedListener>();
  const recent = new Set<string>();
  let subscription: Promise<Unsubscribe> | null = null;

  const onEvent = async (event: { id: string; body: Buffer; database?: string }) => {
    // OUTBOX_IDs are per database: an event is known by its database and id.
    const key = eventKey(event);
    if (recent.has(key)) return;
    recent.add(key);
    if (recent.size > RECENT_IDS) recent.delete(recent.values().next().value as string);
    let message: OutboxMessage;
    try {
      message = parseMessage(event as never);
    } catch (err) {
      logger.warn({ err, event_id: event.id }, "event feed: unreadable message dropped");
      return;
    }
    const shared = new Map<string, unknown>();
    for (const l of listeners) l(message, shared);
  };

  const release = async () => {
    if (listeners.size > 0 || !subscription) return;
    const s = subscription;
    subscription = null;
    await (await s)();
  };

  return {
    async listen(listener) {
      listeners.add(listener);
      subscription ??= bus.subscribe("graphql-feed", onEvent, { durable: false });
      try {
        await subscription;
      } catch (err) {
        listeners.delete(listener);
        subscription = null;
        throw err;
      }
      return async () => {
        listeners.delete(listener);
        await release();
      };
    },
    async close() {
      listeners.clear();
      await release();
    },
  };
}
