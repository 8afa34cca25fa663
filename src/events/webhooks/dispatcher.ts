// The webhook dispatcher (spec 6.1.1, decisions.md §8): a subscriber that matches each event
// against the tenant's active registrations and records one delivery per match in
// TB_WEBHOOK_DELIVERY (idempotent on registration and event, so a redelivered message adds
// nothing). The delivery worker sends them.
import type { Database } from "../../types.ts";
import { type OutboxMessage, parseMessage, type ReceivedEvent } from "../bus.ts";

export interface Registration {
  WEBHOOK_ID: number;
  EVENTS: string[];
  DIMENSIONS: string[] | null;
  FILTERS: Record<string, unknown> | null;
}

/** Spec 6.1.1: the event type listed (or `*`), the dimension listed (or none listed), every filter equal. */
export function matches(reg: Registration, message: OutboxMessage): boolean {
  if (!reg.EVENTS.includes("*") && !reg.EVENTS.includes(message.EVENT_TYPE)) return false;
  if (reg.DIMENSIONS?.length && !reg.DIMENSIONS.includes(message.AGGREGATE_TYPE)) return false;
  const data = message.PAYLOAD ?? {};
  for (const [field, wanted] of Object.entries(reg.FILTERS ?? {})) {
    const actual = data[field];
    if (actual === wanted) continue;
    // 5 and "5" are the same value to a registration written in JSON by hand.
    if (actual === undefined || actual === null || wanted === null || String(actual) !== String(wanted))
      return false;
  }
  return true;
}

/** Spec 6.1.2: the body a receiver gets; these exact bytes are signed. */
export function deliveryBody(message: OutboxMessage): string {
  return JSON.stringify({
    event_id: message.OUTBOX_ID,
    event_type: message.EVENT_TYPE,
    timestamp: message.CREATED_AT,
    dimension: message.AGGREGATE_TYPE,
    record_id: message.AGGREGATE_ID,
    data: message.PAYLOAD,
  });
}

export function createWebhookDispatcher(deps: { db: Database; onQueued: () => void }) {
  return async function dispatch(event: ReceivedEvent): Promise<void> {
    const message = parseMessage(event);
    const { rows } = await deps.db.query<Registration>(
      `SELECT "WEBHOOK_ID", "EVENTS", "DIMENSIONS", "FILTERS" FROM "TB_WEBHOOK"
        WHERE "SOURCE" = $1 AND "ACTIVE" = 'Y'`,
      [message.TENANT_ID],
    );
    const matched = rows.filter((r) => matches(r, message));
    if (matched.length === 0) return;
    const body = deliveryBody(message);
    await deps.db.query(
      `INSERT INTO "TB_WEBHOOK_DELIVERY" ("WEBHOOK_ID", "OUTBOX_ID", "EVENT_TYPE", "BODY")
       SELECT w, $2::bigint, $3, $4 FROM unnest($1::int[]) AS w
       ON CONFLICT ("WEBHOOK_ID", "OUTBOX_ID") DO NOTHING`,
      [matched.map((r) => r.WEBHOOK_ID), message.OUTBOX_ID, message.EVENT_TYPE, body],
    );
    deps.onQueued();
  };
}
