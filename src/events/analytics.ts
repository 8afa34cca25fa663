// The analytics writer (decisions.md §8): counts events per tenant, dimension, event type and
// day in TB_EVENT_STATS, once per message; read through GET /api/v4/analytics/events.
import type { TenantAdmin } from "../auth/authorize.ts";
import { ValidationError } from "../errors.ts";
import type { Database, Queryable } from "../types.ts";
import { parseMessage, type ReceivedEvent } from "./bus.ts";
import { processOnce } from "./consumed.ts";

export const ANALYTICS_SUBSCRIBER = "analytics";

export function createAnalyticsWriter(db: Database) {
  return async (event: ReceivedEvent): Promise<void> => {
    const message = parseMessage(event);
    await processOnce(db, ANALYTICS_SUBSCRIBER, event.id, (tx) =>
      tx
        .query(
          `INSERT INTO "TB_EVENT_STATS" ("TENANT_ID", "DIMENSION", "EVENT_TYPE", "DAY", "COUNT")
           VALUES ($1, $2, $3, ($4::timestamptz AT TIME ZONE 'UTC')::date, 1)
           ON CONFLICT ("TENANT_ID", "DIMENSION", "EVENT_TYPE", "DAY")
           DO UPDATE SET "COUNT" = "TB_EVENT_STATS"."COUNT" + 1`,
          [message.TENANT_ID, message.AGGREGATE_TYPE, message.EVENT_TYPE, message.CREATED_AT],
        )
        .then(() => {}),
    );
  };
}

export interface EventCount {
  dimension: string;
  event_type: string;
  day: string;
  count: number;
}

export interface EventCountQuery {
  from?: string | undefined;
  to?: string | undefined;
  dimension?: string | undefined;
}

const DAY = /^\d{4}-\d{2}-\d{2}$/;

function day(name: string, value: string | undefined): string | null {
  if (value === undefined || value === "") return null;
  const d = new Date(`${value}T00:00:00Z`);
  if (!DAY.test(value) || Number.isNaN(d.getTime()) || d.toISOString().slice(0, 10) !== value) {
    throw new ValidationError("INVALID_PARAMETER", `${name} must be a date (YYYY-MM-DD).`, { field: name });
  }
  return value;
}

/** The caller's tenant's counts, by day (UTC), dimension and event type; at most 10,000 rows. */
export async function readEventCounts(
  db: Queryable,
  caller: TenantAdmin,
  query: EventCountQuery,
): Promise<EventCount[]> {
  const { rows } = await db.query<{
    DIMENSION: string;
    EVENT_TYPE: string;
    DAY: string;
    COUNT: number | string;
  }>(
    `SELECT "DIMENSION", "EVENT_TYPE", to_char("DAY", 'YYYY-MM-DD') AS "DAY", "COUNT"
       FROM "TB_EVENT_STATS"
      WHERE "TENANT_ID" = $1
        AND ($2::date IS NULL OR "DAY" >= $2::date)
        AND ($3::date IS NULL OR "DAY" <= $3::date)
        AND ($4::text IS NULL OR "DIMENSION" = $4)
      ORDER BY "DAY", "DIMENSION", "EVENT_TYPE"
      LIMIT 10000`,
    [caller.tenantId, day("from", query.from), day("to", query.to), query.dimension?.slice(0, 30) || null],
  );
  return rows.map((r) => ({
    dimension: r.DIMENSION,
    event_type: r.EVENT_TYPE,
    day: r.DAY,
    count: Number(r.COUNT),
  }));
}
