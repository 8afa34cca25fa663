// A registration taken over (decisions.md §17: who changes a registration becomes its registrant,
// so another administrator's PATCH changes whose read rights its deliveries follow). Its pending
// deliveries were made for the earlier registrant: their bodies are made again, in the PATCH's
// transaction, for the new one from the events as the outbox keeps them, and those the new
// registrant may not see are cancelled. The worker hands back a delivery it claimed for the
// earlier registrant (src/events/webhooks/delivery.ts), and the dispatcher queues nothing for a
// registrant that is no longer the registration's (dispatcher.ts, QUEUE_SQL): no body made for
// someone else goes out after the change has committed.
import type { MetadataModel, Queryable } from "../../types.ts";
import type { OutboxMessage } from "../bus.ts";
import { outboxRowToEvent } from "../relay.ts";
import { bodyMaker, type RegistrationRow } from "./dispatcher.ts";

/** An outbox row as the relay reads it to publish it. */
type OutboxRow = Parameters<typeof outboxRowToEvent>[0];

/** The registration's pending deliveries with their events (null columns: the event was pruned). */
const PENDING_SQL = `
  SELECT d."DELIVERY_ID"::text AS "DELIVERY_ID", o."OUTBOX_ID"::text AS "OUTBOX_ID", o."EVENT_TYPE",
         o."AGGREGATE_TYPE", o."AGGREGATE_ID", o."PAYLOAD"::text AS "PAYLOAD", o."TENANT_ID",
         o."CREATED_AT", o."PREVIOUS"::text AS "PREVIOUS"
    FROM "TB_WEBHOOK_DELIVERY" d LEFT JOIN "TB_ANAG_OUTBOX00" o ON o."OUTBOX_ID" = d."OUTBOX_ID"
   WHERE d."WEBHOOK_ID" = $1 AND d."STATUS" = 'pending'
     FOR UPDATE OF d`;

/**
 * The new bodies ($2; null: cancelled, for the reason $3). A cancelled delivery with earlier
 * attempts gets a last log row, `failed` with the reason, as the worker writes for one whose
 * registration went away (its log does not end on `retrying`).
 */
const REMAKE_SQL = `
  WITH change AS (
    SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[]) AS c(delivery_id, body, reason)),
  moved AS (
    UPDATE "TB_WEBHOOK_DELIVERY" d
       SET "BODY" = COALESCE(c.body, d."BODY"),
           "STATUS" = CASE WHEN c.body IS NULL THEN 'cancelled' ELSE d."STATUS" END
      FROM change c
     WHERE d."DELIVERY_ID" = c.delivery_id
    RETURNING d."WEBHOOK_ID", d."OUTBOX_ID", d."ATTEMPTS", c.body IS NULL AS cancelled, c.reason)
  INSERT INTO "TB_WEBHOOK_LOG" ("WEBHOOK_ID", "OUTBOX_ID", "STATUS", "HTTP_STATUS", "ERROR_MESSAGE", "ATTEMPT_COUNT")
  SELECT "WEBHOOK_ID", "OUTBOX_ID", 'failed', NULL, reason, "ATTEMPTS" FROM moved
   WHERE cancelled AND "ATTEMPTS" > 0`;

export const NOT_SEEN_BY_NEW_REGISTRANT = "not sent: the webhook's new registrant may not see this event";
export const EVENT_NO_LONGER_KEPT =
  "not sent: the webhook changed registrant and its event is no longer kept to be made again";

/**
 * Makes the pending deliveries of `registration` (as it is now, with its new registrant) again;
 * `tx` is the transaction that changed it. Answers how many were made again and cancelled.
 */
export async function remakePendingDeliveries(
  tx: Queryable,
  model: MetadataModel,
  registration: RegistrationRow,
): Promise<{ remade: number; cancelled: number }> {
  const { rows } = await tx.query<{ DELIVERY_ID: string } & Partial<OutboxRow>>(PENDING_SQL, [
    registration.WEBHOOK_ID,
  ]);
  if (rows.length === 0) return { remade: 0, cancelled: 0 };
  const bodyOf = bodyMaker(model);
  const ids: string[] = [];
  const bodies: Array<string | null> = [];
  const reasons: Array<string | null> = [];
  for (const row of rows) {
    ids.push(row.DELIVERY_ID);
    if (row.OUTBOX_ID === null || row.OUTBOX_ID === undefined) {
      bodies.push(null);
      reasons.push(EVENT_NO_LONGER_KEPT);
      continue;
    }
    // The message the dispatcher was given for this event (the relay's, as published).
    const message = JSON.parse(outboxRowToEvent(row as OutboxRow).body.toString("utf8")) as OutboxMessage;
    const body = bodyOf(registration, message);
    bodies.push(body);
    reasons.push(body === null ? NOT_SEEN_BY_NEW_REGISTRANT : null);
  }
  await tx.query(REMAKE_SQL, [ids, bodies, reasons]);
  const cancelled = bodies.filter((b) => b === null).length;
  return { remade: rows.length - cancelled, cancelled };
}
