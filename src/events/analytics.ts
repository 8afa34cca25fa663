// The analytics writer (decisions.md §8): counts events per tenant, dimension, event type and
// day in TB_EVENT_STATS, once per message; read through GET /api/v4/analytics/events.
import type { TenantAdmin } from "../auth/authorize.ts";
import { ValidationError } from "../errors.ts";
import type { Database, Queryable } from "../types.ts";
import type { BatchHandler } from "./batching.ts";
import { parseMessage } from "./bus.ts";
import { PREPARED } from "./statements.ts";

export const ANALYTICS_SUBSCRIBER = "analytics";

/**
 * Marks a batch's messages and adds the new ones to the counts in one statement (atomic on its
 * own: no transaction around it, nothing waits for the marks): the marks the statement could
 * insert are the messages not counted before, summed per tenant, dimension, event type and day
 * (UTC), so a busy day's row is updated once per batch and a message delivered again counts
 * nothing.
 */
export const ANALYTICS_SQL = `
  WITH batch AS (
         SELECT * FROM unnest($2::bigint[], $3::text[], $4::text[], $5::text[], $6::timestamptz[])
                    AS b(id, tenant, dimension, event_type, created_at)),
       fresh AS (
         INSERT INTO "TB_EVENT_CONSUMED" ("SUBSCRIBER", "OUTBOX_ID")
         SELECT $1::text, id FROM batch
         ON CONFLICT DO NOTHING RETURNING "OUTBOX_ID")
  INSERT INTO "TB_EVENT_STATS" ("TENANT_ID", "DIMENSION", "EVENT_TYPE", "DAY", "COUNT")
  SELECT b.tenant, b.dimension, b.event_type, (b.created_at AT TIME ZONE 'UTC')::date, count(*)
    FROM batch b JOIN fresh f ON f."OUTBOX_ID" = b.id
   GROUP BY 1, 2, 3, 4
  ON CONFLICT ("TENANT_ID", "DIMENSION", "EVENT_TYPE", "DAY")
  DO UPDATE SET "COUNT" = "TB_EVENT_STATS"."COUNT" + EXCLUDED."COUNT"`;

export function createAnalyticsWriter(db: Database): BatchHandler {
  return async (events) => {
    // A message twice in one batch is counted once: the batch sent holds each message once.
    const seen = new Set<string>();
    const ids: string[] = [];
    const tenants: string[] = [];
    const dimensions: string[] = [];
    const types: string[] = [];
    const createdAt: string[] = [];
    for (const e of events) {
      if (seen.has(e.id)) continue;
      seen.add(e.id);
      const m = parseMessage(e);
      ids.push(e.id);
      tenants.push(m.TENANT_ID);
      dimensions.push(m.AGGREGATE_TYPE);
      types.push(m.EVENT_TYPE);
      createdAt.push(m.CREATED_AT);
    }
    await db.query(
      ANALYTICS_SQL,
      [ANALYTICS_SUBSCRIBER, ids, tenants, dimensions, types, createdAt],
      PREPARED,
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
