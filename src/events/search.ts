// The search indexer (decisions.md §8): keeps one TB_SEARCH row per record with the words of its
// searchable fields, read by `$search` on REST lists and `search:` in GraphQL. Searchable: STRING
// and TEXT fields with the search flag (R) and no field weight: the fields every caller may
// filter on already, so a search tells nobody more than a filter would. A row remembers the OUTBOX_ID it was built from: an older or
// repeated message changes nothing (idempotent, and safe against reordering).
import type { MetadataRegistry } from "../metadata/registry.ts";
import type { Database, DimensionDef, FieldDef } from "../types.ts";
import { parseMessage, type ReceivedEvent } from "./bus.ts";

/** Longest text kept per record (the index is for finding records, not storing them). */
const MAX_TEXT = 64 * 1024;

export function searchableFields(dim: DimensionDef): FieldDef[] {
  return dim.fields.filter(
    (f) =>
      (f.dataType === "STRING" || f.dataType === "TEXT") &&
      f.config.flags.has("R") &&
      f.config.codUtente === null,
  );
}

export function createSearchIndexer(deps: { db: Database; metadata: MetadataRegistry }) {
  return async (event: ReceivedEvent): Promise<void> => {
    const m = parseMessage(event);
    const dim = deps.metadata.current().dimensions.get(m.AGGREGATE_TYPE);
    if (!dim) return; // a metadata table's event
    const payload = m.PAYLOAD ?? {};
    if (m.EVENT_TYPE === `${dim.code}Deleted` && payload.force === true) {
      await deps.db.query(
        `DELETE FROM "TB_SEARCH" WHERE "TENANT_ID" = $1 AND "DIMENSION" = $2 AND "RECORD_ID" = $3 AND "OUTBOX_ID" < $4::bigint`,
        [m.TENANT_ID, dim.code, m.AGGREGATE_ID, m.OUTBOX_ID],
      );
      return;
    }
    const text = searchableFields(dim)
      .map((f) => payload[f.code])
      .filter((v): v is string => typeof v === "string" && v.length > 0)
      .join(" ")
      .slice(0, MAX_TEXT);
    await deps.db.query(
      `INSERT INTO "TB_SEARCH" ("TENANT_ID", "DIMENSION", "RECORD_ID", "TEXT", "OUTBOX_ID")
       VALUES ($1, $2, $3, $4, $5::bigint)
       ON CONFLICT ("TENANT_ID", "DIMENSION", "RECORD_ID") DO UPDATE
          SET "TEXT" = EXCLUDED."TEXT", "OUTBOX_ID" = EXCLUDED."OUTBOX_ID", "UPDATED_AT" = now()
        WHERE "TB_SEARCH"."OUTBOX_ID" < EXCLUDED."OUTBOX_ID"`,
      [m.TENANT_ID, dim.code, m.AGGREGATE_ID, text, m.OUTBOX_ID],
    );
  };
}
