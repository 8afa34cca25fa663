// The notification sender (decisions.md §8): turns events into notifications and hands them to a
// transport. The interface is what a mail, chat or push integration implements; the transport
// shipped is a log line per notification.
import type { Logger } from "../logger.ts";
import type { Database } from "../types.ts";
import type { BatchHandler } from "./batching.ts";
import { parseMessage } from "./bus.ts";
import { processEachOnce } from "./consumed.ts";

export interface Notification {
  tenantId: string;
  eventId: string;
  eventType: string;
  dimension: string;
  recordId: string;
  subject: string;
}

export interface NotificationTransport {
  send(notification: Notification): Promise<void>;
  /**
   * Whether a notification sent now would go anywhere (default: yes). The log transport's go
   * nowhere under a log level above info: events are then acknowledged without marks, there being
   * no effect to deduplicate.
   */
  delivers?(): boolean;
}

export function logTransport(logger: Logger): NotificationTransport {
  return {
    delivers: () => logger.isLevelEnabled("info"),
    async send(n) {
      logger.info({ notification: n }, n.subject);
    },
  };
}

export const NOTIFICATIONS_SUBSCRIBER = "notifications";

/**
 * One notification per event, sent once per message id: a batch's marks commit after its sends
 * (a failed send rolls the batch's marks back; its events are then retried one by one). While
 * the transport delivers nothing, a batch is acknowledged as it comes: no transaction, no marks
 * (the subscriber's queue stays bound and drained).
 */
export function createNotificationSender(db: Database, transport: NotificationTransport): BatchHandler {
  return async (events) => {
    if (transport.delivers?.() === false) return;
    await processEachOnce(db, NOTIFICATIONS_SUBSCRIBER, events, async (_tx, fresh) => {
      for (const event of fresh) {
        const m = parseMessage(event);
        await transport.send({
          tenantId: m.TENANT_ID,
          eventId: m.OUTBOX_ID,
          eventType: m.EVENT_TYPE,
          dimension: m.AGGREGATE_TYPE,
          recordId: m.AGGREGATE_ID,
          subject: `${m.EVENT_TYPE} ${m.AGGREGATE_TYPE} ${m.AGGREGATE_ID}`,
        });
      }
    });
  };
}
