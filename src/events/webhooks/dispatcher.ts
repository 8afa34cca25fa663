// The webhook dispatcher (spec 6.1.1, decisions.md §8): a subscriber that matches each event
// against the tenant's active registrations and records one delivery per match in
// TB_WEBHOOK_DELIVERY (idempotent on registration and event, so a redelivered message adds
// nothing). The delivery worker sends them.
import type { Database } from "../../types.ts";
import type { BatchHandler } from "../batching.ts";
import { type OutboxMessage, parseMessage } from "../bus.ts";
import { PREPARED } from "../statements.ts";

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

/**
 * Matches a batch of events: the registrations of the batch's tenants read in one statement, and
 * the deliveries of every match written in one.
 */
export function createWebhookDispatcher(deps: { db: Database; onQueued: () => void }): BatchHandler {
  return async function dispatch(events) {
    const messages = events.map(parseMessage);
    const tenants = [...new Set(messages.map((m) => m.TENANT_ID))];
    const { rows } = await deps.db.query<Registration & { SOURCE: string }>(
      `SELECT "WEBHOOK_ID", "EVENTS", "DIMENSIONS", "FILTERS", "SOURCE" FROM "TB_WEBHOOK"
        WHERE "SOURCE" = ANY($1::text[]) AND "ACTIVE" = 'Y'`,
      [tenants],
      PREPARED,
    );
    if (rows.length === 0) return;
    const webhooks: number[] = [];
    const outboxIds: string[] = [];
    const types: string[] = [];
    const bodies: string[] = [];
    for (const message of messages) {
      let body: string | null = null;
      for (const reg of rows) {
        if (reg.SOURCE !== message.TENANT_ID || !matches(reg, message)) continue;
        body ??= deliveryBody(message);
        webhooks.push(reg.WEBHOOK_ID);
        outboxIds.push(message.OUTBOX_ID);
        types.push(message.EVENT_TYPE);
        bodies.push(body);
      }
    }
    if (webhooks.length === 0) return;
    await deps.db.query(
      `INSERT INTO "TB_WEBHOOK_DELIVERY" ("WEBHOOK_ID", "OUTBOX_ID", "EVENT_TYPE", "BODY")
       SELECT * FROM unnest($1::int[], $2::bigint[], $3::text[], $4::text[])
       ON CONFLICT ("WEBHOOK_ID", "OUTBOX_ID") DO NOTHING`,
      [webhooks, outboxIds, types, bodies],
      PREPARED,
    );
    deps.onQueued();
  };
}
