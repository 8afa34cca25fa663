// Outbox rows (TB_ANAG_OUTBOX00), written in the same transaction as the change they describe
// (spec 2.8, decisions.md §8). PUBLISHED_AT stays null until the relay has published the row.
import { itemsOfNotice, noticeItemsOf, noticePayload } from "../db/notice.ts";
import type { Queryable } from "../types.ts";
import { PREPARED } from "./statements.ts";

/**
 * The member a force delete's event PAYLOAD adds to the record (`"force": true`, docs/events.md):
 * no field of the dimension. Webhook bodies keep it, and a registration may filter on it.
 */
export const FORCE_DELETE_MARK = "force";

export type EventKind = "Created" | "Updated" | "Deleted";

export interface OutboxEvent {
  /** AGGREGATE_TYPE: a dimension code, or a metadata table code (DIM, VAR, COST, …). */
  dim: string;
  kind: EventKind;
  recordId: string | number;
  tenantId: string;
  /** The record, or its JSON text when the caller has serialised it already. */
  payload: Record<string, unknown> | string;
  /** CREATED_AT; the database clock when absent. */
  createdAt?: Date;
  /**
   * PREVIOUS: an update's values before the change, of the fields that changed (JSON text), by
   * which a row leaving a row scope is judged (decisions.md §17); absent for creates and deletes.
   */
  previous?: string;
}

/** `<COD_DIM>Created`, `<COD_DIM>Updated`, `<COD_DIM>Deleted`. */
export function eventType(dim: string, kind: EventKind): string {
  return `${dim}${kind}`;
}

/** The NOTIFY channel that wakes relays (in every process) when a transaction with events commits. */
export const OUTBOX_CHANNEL = "dimensio_outbox";

/**
 * The item of the outbox's NOTIFY (src/db/notice.ts) that says what a committed event changed:
 * the records of `dim` of `tenantId` (the totals cache forgets theirs, and only theirs).
 */
export function outboxNoticeItem(tenantId: string, dim: string): string {
  return JSON.stringify([tenantId, dim]);
}

/** An item outboxNoticeItem writes for two strings free of quotes, backslashes, control and surrogate characters. */
const PLAIN_ITEM =
  /^\["[\u0020\u0021\u0023-\u005b\u005d-\ud7ff\ue000-\uffff]*","[\u0020\u0021\u0023-\u005b\u005d-\ud7ff\ue000-\uffff]*"\]$/;

/**
 * The (tenant, dimension) items an outbox NOTIFY's payload names, each as outboxNoticeItem writes
 * it; null when it names none or any it names is not one (anything may have changed).
 */
export function outboxNoticeItems(payload: string): string[] | null {
  const items = itemsOfNotice(payload);
  if (!items) return null;
  for (const item of items) {
    // Two strings with nothing JSON escapes (the tenants and dimensions there are): as written.
    if (PLAIN_ITEM.test(item)) continue;
    try {
      const parsed = JSON.parse(item) as unknown;
      if (!Array.isArray(parsed) || parsed.length !== 2 || parsed.some((v) => typeof v !== "string"))
        return null;
      if (outboxNoticeItem(parsed[0], parsed[1]) !== item) return null;
    } catch {
      return null;
    }
  }
  return items;
}

/**
 * A data-modifying statement that travels in the outbox row's statement as a CTE of it (a
 * record's revision: src/history/revisions.ts): `sql(first)` its text, its parameters numbered
 * from $first on.
 */
export interface AlongsideStatement {
  sql(first: number): string;
  params: readonly unknown[];
}

/**
 * Inserts one event row and has the relays woken when the transaction commits: on PostgreSQL by
 * the database handle after COMMIT (folded with other commits' wake-ups), elsewhere by a NOTIFY
 * queued in the same statement (identical notifications of one transaction are folded into one).
 * Either way the notice names the event's tenant and dimension (outboxNoticeItem).
 * `alongside`: a statement sent with it, in the same statement (no statement of its own).
 * Returns the OUTBOX_ID as a string (the response's event_id).
 */
export async function insertOutboxEvent(
  tx: Queryable,
  event: OutboxEvent,
  alongside?: AlongsideStatement,
): Promise<string> {
  const afterCommit = tx.notifyAfterCommit !== undefined;
  const item = outboxNoticeItem(event.tenantId, event.dim);
  tx.notifyAfterCommit?.(OUTBOX_CHANNEL, item);
  const also = alongside ? `,\n     also AS (${alongside.sql(afterCommit ? 8 : 9)})` : "";
  const res = await tx.query<{ OUTBOX_ID: number | string }>(
    `WITH inserted AS (
       INSERT INTO "TB_ANAG_OUTBOX00" ("EVENT_TYPE", "AGGREGATE_TYPE", "AGGREGATE_ID", "PAYLOAD", "TENANT_ID", "CREATED_AT", "PREVIOUS")
       VALUES ($1, $2, $3, $4, $5, COALESCE($6::timestamptz, now()), $7::jsonb) RETURNING "OUTBOX_ID")${also}
     SELECT "OUTBOX_ID"${afterCommit ? "" : `, pg_notify('${OUTBOX_CHANNEL}', $8)`} FROM inserted`,
    [
      eventType(event.dim, event.kind),
      event.dim,
      String(event.recordId),
      typeof event.payload === "string" ? event.payload : JSON.stringify(event.payload),
      event.tenantId,
      event.createdAt ? event.createdAt.toISOString() : null,
      event.previous ?? null,
      ...(afterCommit ? [] : [noticePayload(noticeItemsOf(item))]),
      ...(alongside?.params ?? []),
    ],
    PREPARED,
  );
  return String(res.rows[0]!.OUTBOX_ID);
}

/**
 * The outbox row's NOT NULL columns without a default, in the table's column order (the order
 * PostgreSQL checks them in): a statement may null one on purpose to fail (23502, naming it).
 */
export const REQUIRED_OUTBOX_COLUMNS = [
  "EVENT_TYPE",
  "AGGREGATE_TYPE",
  "AGGREGATE_ID",
  "PAYLOAD",
  "TENANT_ID",
] as const;
export type RequiredOutboxColumn = (typeof REQUIRED_OUTBOX_COLUMNS)[number];

/**
 * The INSERT of one event row whose AGGREGATE_ID and PAYLOAD are SQL expressions over the row of
 * `from` (a data-modifying CTE: the record the same statement inserts), for a statement that
 * writes a record and its event together (record-store.ts); it answers OUTBOX_ID, AGGREGATE_ID
 * and PAYLOAD (the record's revision reads it: src/history/revisions.ts). `param` adds a
 * parameter. The row's columns are those insertOutboxEvent writes, with the same values.
 * `nulledWhen`: a column made NULL where its condition (SQL over `from`) holds, which fails the
 * statement on that column.
 */
export function outboxInsertFromSql(
  event: Omit<OutboxEvent, "recordId" | "payload">,
  from: string,
  aggregateId: string,
  payload: string,
  param: (v: unknown) => string,
  nulledWhen: Partial<Record<RequiredOutboxColumn, string>> = {},
): string {
  const value = (column: RequiredOutboxColumn, sql: string) => {
    const when = nulledWhen[column];
    return when ? `CASE WHEN ${when} THEN NULL ELSE ${sql} END` : sql;
  };
  return `INSERT INTO "TB_ANAG_OUTBOX00" ("EVENT_TYPE", "AGGREGATE_TYPE", "AGGREGATE_ID", "PAYLOAD", "TENANT_ID", "CREATED_AT")
       SELECT ${value("EVENT_TYPE", param(eventType(event.dim, event.kind)))}, ${value("AGGREGATE_TYPE", param(event.dim))}, ${value("AGGREGATE_ID", aggregateId)}, ${value("PAYLOAD", payload)}, ${value("TENANT_ID", param(event.tenantId))},
              COALESCE(${param(event.createdAt ? event.createdAt.toISOString() : null)}::timestamptz, now())
         FROM ${from} RETURNING "OUTBOX_ID", "AGGREGATE_ID", "PAYLOAD"`;
}
