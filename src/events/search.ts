// The search indexer (decisions.md §8): keeps one TB_SEARCH row per record with the words of its
// searchable fields, read by `$search` on REST lists and `search:` in GraphQL. Searchable: STRING
// and TEXT fields with the search flag (R) and no field weight, in the default TB_COST row and in
// every CENTER_DETT one: the fields every caller may filter on already, so a search tells nobody
// more than a filter would. A row remembers the OUTBOX_ID it was built from: an older or repeated
// message changes nothing (idempotent, and safe against reordering).
//
// Which fields are searchable is metadata, and metadata changes after rows were built (a weight
// set on a field hides it; "Search follows field visibility" in decisions.md). Two things keep a
// search to the fields searchable now: the match is checked again on the record's own current
// values of those fields (searchTextSql, src/query/compile.ts), so a word of a field hidden since
// its row was built never matches, whatever the index still holds; and a metadata event touching
// a dimension's fields makes this subscriber derive its rows again from the records (rebuild
// below), in batches, so that the index holds what it should (the words of a field made
// searchable included). Which fields are searchable, and a record's text over them, are derived
// in src/metadata/search-text.ts, which the query side reads too.
import { ident } from "../db/sql.ts";
import { TENANT_COLUMN } from "../metadata/data-types.ts";
import type { MetadataRegistry } from "../metadata/registry.ts";
import { searchableFields, searchSignature, searchText, searchTextSql } from "../metadata/search-text.ts";
import type { Database, DimensionDef } from "../types.ts";
import type { BatchHandler } from "./batching.ts";
import { type OutboxMessage, parseMessage } from "./bus.ts";
import { PREPARED } from "./statements.ts";

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

/** The metadata tables whose rows decide which fields of a dimension are searchable. */
const FIELD_METADATA = new Set(["DIM", "VAR", "COST"]);

/** Records whose index rows one rebuild statement derives again (bounds its time and memory). */
export const REBUILD_BATCH = 500;

/**
 * One step of a dimension's rebuild: the next REBUILD_BATCH records of its table after the key
 * (tenant, id) given ($3, $4; none on the first step), their index text derived from their
 * columns, written over the rows that differ. A row the indexer changed since this statement's
 * snapshot keeps the indexer's (OUTBOX_ID guard, rechecked on the newer row version): it is newer.
 * Records without a row are left to their events. Answers the records read and the last key.
 */
function rebuildSql(dim: DimensionDef, first: boolean): string {
  const tenant = `t.${ident(TENANT_COLUMN)}`;
  const id = `t.${ident(dim.idField)}`;
  return `
  WITH page AS (
    SELECT ${tenant} AS tenant, ${id} AS id, ${searchTextSql(searchableFields(dim), "t")} AS text
      FROM ${ident(dim.tableName)} AS t
     ${first ? "" : `WHERE (${tenant}, ${id}) > ($3, $4)`}
     ORDER BY ${tenant}, ${id}
     LIMIT $2),
  stale AS (
    SELECT s."TENANT_ID" AS tenant, s."RECORD_ID" AS record, s."OUTBOX_ID" AS outbox, p.text
      FROM page p JOIN "TB_SEARCH" s
        ON s."TENANT_ID" = p.tenant AND s."DIMENSION" = $1 AND s."RECORD_ID" = p.id::text
     WHERE s."TEXT" IS DISTINCT FROM p.text),
  fixed AS (
    UPDATE "TB_SEARCH" s SET "TEXT" = x.text, "UPDATED_AT" = now()
      FROM stale x
     WHERE s."TENANT_ID" = x.tenant AND s."DIMENSION" = $1 AND s."RECORD_ID" = x.record
       AND s."OUTBOX_ID" = x.outbox
    RETURNING 1)
  SELECT (SELECT count(*) FROM page)::int AS read, (SELECT count(*) FROM fixed)::int AS fixed,
         last.tenant AS last_tenant, last.id AS last_id
    FROM (SELECT 1) AS one
    LEFT JOIN (SELECT tenant, id FROM page ORDER BY tenant DESC, id DESC LIMIT 1) AS last ON TRUE`;
}

interface RebuildStep {
  read: number;
  fixed: number;
  last_tenant: unknown;
  last_id: unknown;
}

/**
 * Derives a dimension's index rows again from its records, `batch` at a time in key order
 * (one statement each: the memory and the time of a step are bounded, a large dimension only
 * takes more steps). Answers the rows changed.
 */
export async function rebuildSearchIndex(
  db: Database,
  dim: DimensionDef,
  batch: number = REBUILD_BATCH,
): Promise<number> {
  let after: { tenant: unknown; id: unknown } | null = null;
  let changed = 0;
  for (;;) {
    const params: unknown[] = [dim.code, batch];
    if (after) params.push(after.tenant, after.id);
    const sql: string = rebuildSql(dim, after === null);
    const { rows } = await db.query<RebuildStep>(sql, params);
    const step: RebuildStep = rows[0]!;
    changed += step.fixed;
    if (step.read < batch) return changed;
    after = { tenant: step.last_tenant, id: step.last_id };
  }
}

/**
 * Indexes a batch of events: per record only its latest event counts (a record created and then
 * changed in one batch is indexed once, as it is now), in one statement (SEARCH_SQL): an older
 * message changes nothing.
 *
 * A metadata event (TB_DIM, TB_VAR, TB_COST) naming a dimension rebuilds that dimension's rows in
 * each of `databases` (the main database's handler is given every database: metadata events come
 * from it alone) whose TB_SEARCH_FIELDS row says they were last rebuilt from other searchable
 * fields, or says nothing (rebuildIfChanged): an event that changed no searchable field rebuilds
 * nothing, after a restart too. It runs after the batch's own rows, with the metadata of the
 * change or later. The queue waits meanwhile, and the message is acknowledged once the rebuild is
 * done (a rebuild cut short by a crash or an error has not recorded its fields: it is done again
 * when the message is).
 */
export function createSearchIndexer(deps: {
  db: Database;
  metadata: MetadataRegistry;
  databases?: () => Iterable<Database>;
}): BatchHandler {
  return async (events) => {
    const dimensions = deps.metadata.current().dimensions;
    const latest = new Map<string, { m: OutboxMessage; dim: DimensionDef }>();
    let touched: Set<string> | null = null;
    for (const e of events) {
      const m = parseMessage(e);
      const dim = dimensions.get(m.AGGREGATE_TYPE);
      if (!dim) {
        // A metadata table's event.
        const code = m.PAYLOAD?.COD_DIM;
        if (FIELD_METADATA.has(m.AGGREGATE_TYPE) && typeof code === "string") {
          touched ??= new Set();
          touched.add(code);
        }
        continue;
      }
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
      upserts.push({ m, dim: dim.code, text: searchText(searchableFields(dim), payload) });
    }
    if (deletes.length > 0 || upserts.length > 0) {
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
    }
    if (touched) await rebuildTouched(touched);
  };

  async function rebuildTouched(codes: ReadonlySet<string>): Promise<void> {
    // The event may arrive before this process's NOTIFY of the change: read the version now.
    const model = await deps.metadata.refresh();
    for (const code of codes) {
      const dim = model.dimensions.get(code);
      for (const db of deps.databases?.() ?? [deps.db]) {
        // A dimension gone: what its rows were built from is forgotten, so that a dimension made
        // again under its code is rebuilt by its first metadata event.
        if (dim) await rebuildIfChanged(db, dim);
        else await db.query(`DELETE FROM "TB_SEARCH_FIELDS" WHERE "DIMENSION" = $1`, [code]);
      }
    }
  }
}

/**
 * Rebuilds a dimension's index rows in `db` unless its TB_SEARCH_FIELDS row says they were last
 * rebuilt from the searchable fields it has now, then records those fields (once the rebuild is
 * done: one cut short leaves the row as it was). Answers whether it rebuilt. The row is per
 * database and survives a restart: a process that never rebuilt a dimension does not take its
 * fields for unknown, only a database that has no row for it.
 */
export async function rebuildIfChanged(db: Database, dim: DimensionDef): Promise<boolean> {
  const fields = searchSignature(dim);
  const { rows } = await db.query<{ FIELDS: string }>(
    `SELECT "FIELDS" FROM "TB_SEARCH_FIELDS" WHERE "DIMENSION" = $1`,
    [dim.code],
  );
  if (rows[0]?.FIELDS === fields) return false;
  await rebuildSearchIndex(db, dim);
  await db.query(
    `INSERT INTO "TB_SEARCH_FIELDS" ("DIMENSION", "FIELDS") VALUES ($1, $2)
     ON CONFLICT ("DIMENSION") DO UPDATE SET "FIELDS" = EXCLUDED."FIELDS", "UPDATED_AT" = now()`,
    [dim.code, fields],
  );
  return true;
}
