// The analytics writer (decisions.md §8): counts events per tenant, dimension, event type and
// day in TB_EVENT_STATS, once per message; read through GET /api/v4/analytics/events.
import type { TenantAdmin } from "../auth/authorize.ts";
import { ValidationError } from "../errors.ts";
import type { Database, Queryable } from "../types.ts";
import type { BatchHandler } from "./batching.ts";
import { parseMessage } from "./bus.ts";
import { processEachOnce } from "./consumed.ts";
import { sendAtCommit } from "./statements.ts";

export const ANALYTICS_SUBSCRIBER = "analytics";

/**
 * Adds a batch of events to the counts: one statement for the batch's new messages, summed per
 * tenant, dimension, event type and day (a busy day's row is updated once per batch, not once
 * per event).
 */
export function createAnalyticsWriter(db: Database): BatchHandler {
  return (events) =>
    processEachOnce(db, ANALYTICS_SUBSCRIBER, events, async (tx, fresh) => {
      const counts = new Map<string, { key: [string, string, string, string]; count: number }>();
      for (const e of fresh) {
        const m = parseMessage(e);
        const key: [string, string, string, string] = [
          m.TENANT_ID,
          m.AGGREGATE_TYPE,
          m.EVENT_TYPE,
          new Date(m.CREATED_AT).toISOString().slice(0, 10),
        ];
        const id = key.join("\u0000");
        const entry = counts.get(id);
        if (entry) entry.count++;
        else counts.set(id, { key, count: 1 });
      }
      const rows = [...counts.values()];
      await sendAtCommit(
        tx,
        `INSERT INTO "TB_EVENT_STATS" ("TENANT_ID", "DIMENSION", "EVENT_TYPE", "DAY", "COUNT")
         SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::date[], $5::int[])
         ON CONFLICT ("TENANT_ID", "DIMENSION", "EVENT_TYPE", "DAY")
         DO UPDATE SET "COUNT" = "TB_EVENT_STATS"."COUNT" + EXCLUDED."COUNT"`,
        [
          rows.map((r) => r.key[0]),
          rows.map((r) => r.key[1]),
          rows.map((r) => r.key[2]),
          rows.map((r) => r.key[3]),
          rows.map((r) => r.count),
        ],
      );
    });
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
