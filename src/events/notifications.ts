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
}

export function logTransport(logger: Logger): NotificationTransport {
  return {
    async send(n) {
      logger.info({ notification: n }, n.subject);
    },
  };
}

export const NOTIFICATIONS_SUBSCRIBER = "notifications";

/**
 * One notification per event, sent once per message id: a batch's marks commit after its sends
 * (a failed send rolls the batch's marks back; its events are then retried one by one).
 */
export function createNotificationSender(db: Database, transport: NotificationTransport): BatchHandler {
  return (events) =>
    processEachOnce(db, NOTIFICATIONS_SUBSCRIBER, events, async (_tx, fresh) => {
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
}
