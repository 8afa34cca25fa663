// Outbox rows (TB_ANAG_OUTBOX00), written in the same transaction as the change they describe.
import type { Queryable } from "../types.ts";

export type EventKind = "Created" | "Updated" | "Deleted";

export interface OutboxEvent {
  dim: string;
  kind: EventKind;
  recordId: string | number;
  tenantId: string;
  payload: Record<string, unknown>;
}

/** Inserts one event row; returns its OUTBOX_ID as a string (the response's event_id). */
export async function insertOutboxEvent(tx: Queryable, event: OutboxEvent): Promise<string> {
  const res = await tx.query<{ OUTBOX_ID: number | string }>(
    `INSERT INTO "TB_ANAG_OUTBOX00" ("EVENT_TYPE", "AGGREGATE_TYPE", "AGGREGATE_ID", "PAYLOAD", "TENANT_ID")
     VALUES ($1, $2, $3, $4, $5) RETURNING "OUTBOX_ID"`,
    [
      `${event.dim}${event.kind}`,
      event.dim,
      String(event.recordId),
      JSON.stringify(event.payload),
      event.tenantId,
    ],
  );
  return String(res.rows[0]!.OUTBOX_ID);
}
