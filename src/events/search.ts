// The search indexer (decisions.md §8): keeps one TB_SEARCH row per record with the words of its
// searchable fields, read by `$search` on REST lists and `search:` in GraphQL. Searchable: STRING
// and TEXT fields with the search flag (R) and no field weight: the fields every caller may
// filter on already, so a search tells nobody more than a filter would. A row remembers the OUTBOX_ID it was built from: an older or
// repeated message changes nothing (idempotent, and safe against reordering).
import { perDefinition } from "../metadata/per-definition.ts";
import type { MetadataRegistry } from "../metadata/registry.ts";
import type { Database, DimensionDef, FieldDef } from "../types.ts";
import type { BatchHandler } from "./batching.ts";
import { type OutboxMessage, parseMessage } from "./bus.ts";
import { PREPARED } from "./statements.ts";

/** Longest text kept per record (the index is for finding records, not storing them). */
const MAX_TEXT = 64 * 1024;

/** A dimension's searchable fields (once per definition). */
export const searchableFields = perDefinition((dim): readonly FieldDef[] =>
  dim.fields.filter(
    (f) =>
      (f.dataType === "STRING" || f.dataType === "TEXT") &&
      f.config.flags.has("R") &&
      f.config.codUtente === null,
  ),
);

/**
 * A batch's changes to the index in one statement (atomic on its own: no transaction, one round
 * trip): the force deletes ($6–$9) and the upserts ($1–$5), each guarded by OUTBOX_ID. A record is
 * in one of the two lists at most (its latest event decides), so the two never touch one row.
 */
const SEARCH_SQL = `
  WITH gone AS (
    DELETE FROM "TB_SEARCH" s
     USING unnest($6::text[], $7::text[], $8::text[], $9::bigint[]) AS d(tenant, dimension, record, outbox)
     WHERE s."TENANT_ID" = d.tenant AND s."DIMENSION" = d.dimension AND s."RECORD_ID" = d.record
       AND s."OUTBOX_ID" < d.outbox)
  INSERT INTO "TB_SEARCH" ("TENANT_ID", "DIMENSION", "RECORD_ID", "TEXT", "OUTBOX_ID")
  SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[])
  ON CONFLICT ("TENANT_ID", "DIMENSION", "RECORD_ID") DO UPDATE
     SET "TEXT" = EXCLUDED."TEXT", "OUTBOX_ID" = EXCLUDED."OUTBOX_ID", "UPDATED_AT" = now()
   WHERE "TB_SEARCH"."OUTBOX_ID" < EXCLUDED."OUTBOX_ID"`;

/**
 * Indexes a batch of events: per record only its latest event counts (a record created and then
 * changed in one batch is indexed once, as it is now), in one statement (SEARCH_SQL): an older
 * message changes nothing.
 */
export function createSearchIndexer(deps: { db: Database; metadata: MetadataRegistry }): BatchHandler {
  return async (events) => {
    const dimensions = deps.metadata.current().dimensions;
    const latest = new Map<string, { m: OutboxMessage; dim: DimensionDef }>();
    for (const e of events) {
      const m = parseMessage(e);
      const dim = dimensions.get(m.AGGREGATE_TYPE);
      if (!dim) continue; // a metadata table's event
      const key = `${m.TENANT_ID}\u0000${dim.code}\u0000${m.AGGREGATE_ID}`;
      const seen = latest.get(key);
      if (!seen || BigInt(seen.m.OUTBOX_ID) < BigInt(m.OUTBOX_ID)) latest.set(key, { m, dim });
    }
    const deletes: OutboxMessage[] = [];
    const upserts: Array<{ m: OutboxMessage; dim: string; text: string }> = [];
    for (const { m, dim } of latest.values()) {
      const payload = m.PAYLOAD ?? {};
      if (m.EVENT_TYPE === `${dim.code}Deleted` && payload.force === true) {
        deletes.push(m);
        continue;
      }
      const text = searchableFields(dim)
        .map((f) => payload[f.code])
        .filter((v): v is string => typeof v === "string" && v.length > 0)
        .join(" ")
        .slice(0, MAX_TEXT);
      upserts.push({ m, dim: dim.code, text });
    }
    if (deletes.length === 0 && upserts.length === 0) return;
    await deps.db.query(
      SEARCH_SQL,
      [
        upserts.map((u) => u.m.TENANT_ID),
        upserts.map((u) => u.dim),
        upserts.map((u) => u.m.AGGREGATE_ID),
        upserts.map((u) => u.text),
        upserts.map((u) => u.m.OUTBOX_ID),
        deletes.map((m) => m.TENANT_ID),
        deletes.map((m) => m.AGGREGATE_TYPE),
        deletes.map((m) => m.AGGREGATE_ID),
        deletes.map((m) => m.OUTBOX_ID),
      ],
      PREPARED,
    );
  };
}
