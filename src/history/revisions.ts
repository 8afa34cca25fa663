// Record history (issue 39 §1; docs/decisions.md, "Record history"): one revision row per change of
// a record (TB_HISTORY), written in the write's own transaction beside its outbox row, so a write
// rolled back leaves none. A revision holds only the fields that changed, {FIELD: {before, after}},
// values in their REST JSON form (as the event payload has them): the dimension's TB_VAR fields and
// TREC; the other audit fields are the revision's own `at` and `user`. A create written in SQL is
// stored compactly (CREATED_KEY); readers take every revision through revisionChanges.
import type { AlongsideStatement } from "../events/outbox.ts";
import type { DimensionDef, Queryable } from "../types.ts";
import { perDefinition } from "../metadata/per-definition.ts";

/** What a revision says happened (TB_HISTORY.OPERATION). */
export type RevisionOperation = "create" | "update" | "delete" | "state" | "command" | "restore";

export type Changes = Record<string, { before: unknown; after: unknown }>;

type Row = Record<string, unknown>;

/** A revision about to be written: its record, operation and who made it when. */
export interface RevisionInput {
  dim: DimensionDef;
  tenantId: string;
  recordId: string | number;
  userId: string;
  at: Date;
  operation: RevisionOperation;
  changes: Changes;
}

/** Prepared under one namespace: TB_HISTORY is a fixed table (changed by migrations only). */
const PREPARED = { prepare: "history" } as const;

/** The fields a revision follows: the TB_VAR fields and TREC (not the other audit fields). */
export const trackedFields = perDefinition((dim: DimensionDef): readonly string[] =>
  dim.fields.filter((f) => !f.system || f.code === "TREC").map((f) => f.code),
);

/** A field code as an SQL string literal (codes are validated identifiers; quotes doubled anyway). */
const literal = (code: string) => `'${code.replaceAll("'", "''")}'`;

/**
 * The JSON object of the tracked fields of the event payload `e."PAYLOAD"` (createRevisionsSql's
 * event rows): the payload, which holds every field of the dimension (record-store.ts eventSql),
 * less its untracked ones, in one `jsonb - text[]` (a field without a value is a JSON null, left
 * out when read). About 2.5 µs of PostgreSQL per row, where extracting each tracked field into a
 * jsonb_build_object took 8 (docs/benchmarks.md, "Record history on W4"). Made once per dimension
 * definition, not per create.
 */
const trackedObjectSql = perDefinition((dim: DimensionDef): string => {
  const tracked = new Set(trackedFields(dim));
  const untracked = dim.fields.filter((f) => !tracked.has(f.code)).map((f) => literal(f.code));
  return untracked.length ? `(e."PAYLOAD" - ARRAY[${untracked.join(", ")}]::text[])` : 'e."PAYLOAD"';
});

/**
 * The key under which a create revision written in SQL keeps the record's tracked fields as they
 * were created, `{"$created": {FIELD: value}}`, instead of `{FIELD: {before: null, after: value}}`:
 * the same revision, built by one jsonb_build_object instead of a jsonb_each and an aggregate (a
 * third of the PostgreSQL time of the revision's row; docs/benchmarks.md). No field code starts
 * with `$`. Read through `revisionChanges`.
 */
const CREATED_KEY = "$created";

/**
 * A revision's changes as stored (TB_HISTORY.CHANGES, JSON text or parsed), in the one form every
 * reader takes: {FIELD: {before, after}}. A create written in SQL (CREATED_KEY) gives every field
 * that had a value, before null, as changedFields(dim, null, record) does.
 */
export function revisionChanges(stored: unknown): Changes {
  const parsed = (typeof stored === "string" ? JSON.parse(stored) : stored) as Record<string, unknown>;
  const created = parsed?.[CREATED_KEY];
  if (!created || typeof created !== "object") return parsed as Changes;
  const changes: Changes = {};
  for (const [code, value] of Object.entries(created as Record<string, unknown>))
    if (value !== null && value !== undefined) changes[code] = { before: null, after: value };
  return changes;
}

/** Whether a field holds the same value before and after a change (null and absent alike). */
export function sameValue(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (a === null || a === undefined || b === null || b === undefined) return a == null && b == null;
  if (typeof a !== "object" && typeof b !== "object") return false;
  return JSON.stringify(a) === JSON.stringify(b);
}

/**
 * The fields of `dim` that differ between `before` and `after` (records as the write pipeline
 * reads them); `before` null for a create: every field it gave a value.
 */
export function changedFields(dim: DimensionDef, before: Row | null, after: Row): Changes {
  const changes: Changes = {};
  for (const code of trackedFields(dim)) {
    const was = before ? (before[code] ?? null) : null;
    const is = after[code] ?? null;
    if (!sameValue(was, is)) changes[code] = { before: was, after: is };
  }
  return changes;
}

/**
 * A revision's INSERT, sent inside its outbox row's statement (insertOutboxEvent's `alongside`):
 * no statement of its own. Numbered one past the record's latest: the record's row is locked by
 * the write, so writers of one record number in turn.
 */
export function revisionInsert(r: RevisionInput): AlongsideStatement {
  return {
    sql: (n) => {
      const [tenant, dim, record] = [`$${n}::text`, `$${n + 1}::text`, `$${n + 2}::text`];
      return `INSERT INTO "TB_HISTORY" ("TENANT_ID", "DIMENSION", "RECORD_ID", "REVISION", "CHANGED_AT", "USER_ID", "OPERATION", "CHANGES")
       SELECT ${tenant}, ${dim}, ${record}, COALESCE(max("REVISION"), 0) + 1, $${n + 3}::timestamptz, $${n + 4}::text, $${n + 5}::text, $${n + 6}::jsonb
         FROM "TB_HISTORY" WHERE "TENANT_ID" = ${tenant} AND "DIMENSION" = ${dim} AND "RECORD_ID" = ${record}`;
    },
    params: [
      r.tenantId,
      r.dim.code,
      String(r.recordId),
      r.at.toISOString(),
      r.userId,
      r.operation,
      JSON.stringify(r.changes),
    ],
  };
}

/**
 * A force delete removes the record's history with it (whatever TB_DIM.HISTORY says now): a
 * DELETE sent inside the Deleted event's statement.
 */
export function revisionsRemoval(
  dim: DimensionDef,
  tenantId: string,
  recordId: string | number,
): AlongsideStatement {
  return {
    sql: (n) =>
      `DELETE FROM "TB_HISTORY" WHERE "TENANT_ID" = $${n}::text AND "DIMENSION" = $${n + 1}::text AND "RECORD_ID" = $${n + 2}::text`,
    params: [tenantId, dim.code, String(recordId)],
  };
}

/** A record's key changed (an update of its id): its revisions follow it. */
export async function moveRevisions(
  tx: Queryable,
  dim: DimensionDef,
  tenantId: string,
  from: string | number,
  to: string | number,
): Promise<void> {
  await tx.query(
    `UPDATE "TB_HISTORY" SET "RECORD_ID" = $4 WHERE "TENANT_ID" = $1 AND "DIMENSION" = $2 AND "RECORD_ID" = $3`,
    [tenantId, dim.code, String(from), String(to)],
    PREPARED,
  );
}

/**
 * For a statement that inserts records and their Created events (record-store.ts): the INSERT of
 * one create revision per event row of `events` (a data-modifying CTE answering AGGREGATE_ID and
 * PAYLOAD), its changes built in SQL from the event's payload: every tracked field, under
 * CREATED_KEY (revisionChanges reads them as changedFields(dim, null, record) gives them). Its
 * user is the record's creator (OWNER or CREATED_BY, the caller's id: the creates of a group may be
 * different users'); its time the event's (a group's first create's, as its events'). `param` adds
 * a parameter.
 */
export function createRevisionsSql(
  dim: DimensionDef,
  tenantId: string,
  at: Date,
  events: string,
  param: (v: unknown) => string,
): string {
  const tenant = `${param(tenantId)}::text`;
  const dimCode = `${param(dim.code)}::text`;
  return `INSERT INTO "TB_HISTORY" ("TENANT_ID", "DIMENSION", "RECORD_ID", "REVISION", "CHANGED_AT", "USER_ID", "OPERATION", "CHANGES")
       SELECT ${tenant}, ${dimCode}, e."AGGREGATE_ID",
              COALESCE((SELECT max(h."REVISION") FROM "TB_HISTORY" h
                         WHERE h."TENANT_ID" = ${tenant} AND h."DIMENSION" = ${dimCode} AND h."RECORD_ID" = e."AGGREGATE_ID"), 0) + 1,
              ${param(at.toISOString())}::timestamptz, e."PAYLOAD"->>'${dim.auditStyle === "CREATED" ? "CREATED_BY" : "OWNER"}', 'create',
              jsonb_build_object('${CREATED_KEY}', ${trackedObjectSql(dim)})
         FROM ${events} e`;
}
