// The notification sender (decisions.md §8): turns events into notifications and hands them to a
// transport. The interface is what a mail, chat or push integration implements; the transport
// shipped is a log line per notification.
import type { Logger } from "../logger.ts";
import type { Database } from "../types.ts";
import { parseMessage, type ReceivedEvent } from "./bus.ts";
import { processOnce } from "./consumed.ts";

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

/** One notification per event, sent once per message id (the mark commits after the send). */
export function createNotificationSender(db: Database, transport: NotificationTransport) {
  return async (event: ReceivedEvent): Promise<void> => {
    const m = parseMessage(event);
    await processOnce(db, NOTIFICATIONS_SUBSCRIBER, event.id, () =>
      transport.send({
        tenantId: m.TENANT_ID,
        eventId: m.OUTBOX_ID,
        eventType: m.EVENT_TYPE,
        dimension: m.AGGREGATE_TYPE,
        recordId: m.AGGREGATE_ID,
        subject: `${m.EVENT_TYPE} ${m.AGGREGATE_TYPE} ${m.AGGREGATE_ID}`,
      }),
    );
  };
}
