// listHistory: GET /{dim}/{id}/history and GraphQL {DIM}_history (decisions.md §19): a record's
// revisions newest first, each showing only the fields the caller may read in detail (D) at its
// peso. Needs the read grant; a record the caller cannot read (unknown, another tenant's) is 404.
import type { AuthorizedDimension } from "../../auth/access-view.ts";
import { ident } from "../../db/sql.ts";
import { TENANT_COLUMN } from "../../metadata/data-types.ts";
import { rowScopeSql } from "../../query/compile.ts";
import { rowScopeOf } from "../../query/plan.ts";
import { type Changes, type RevisionOperation, revisionChanges } from "../../history/revisions.ts";
import type { DimensionDef } from "../../types.ts";
import { compactTimestamp } from "../write/values.ts";
import { parseRecordId, recordNotFound } from "../write/record-store.ts";
import { readableDimension } from "./common.ts";
import type { ReadContext } from "./context.ts";

export interface Revision {
  revision: number;
  /** 14 digits, YYYYMMDDHHmmss (UTC), as the audit fields. */
  at: string;
  user: string;
  operation: RevisionOperation;
  changes: Changes;
}

export interface HistoryPage {
  data: Revision[];
  meta: { total: number; num_rows: number; offset: number; has_more: boolean };
}

/** A page of history: `limit` revisions after `offset` ones, or (keyset) older than `before`. */
export interface HistoryPaging {
  limit: number;
  offset: number;
  /** Only revisions below this number (a cursor's: the last one of the page before). */
  before?: number;
}

interface HistoryRow {
  REVISION: number;
  CHANGED_AT: Date | string;
  USER_ID: string;
  OPERATION: RevisionOperation;
  CHANGES: Changes | string;
}

/**
 * The record `rawId` of `dim` as the caller may read it, for its history: 404 RECORD_NOT_FOUND when
 * there is none in the caller's tenant and row scope (decisions.md §17: a record out of scope has
 * no history). A cancelled record (TREC C) keeps its history readable: its revisions are how it
 * may be understood and restored.
 */
export async function requireHistoryRecord(
  rc: Pick<ReadContext, "db" | "request">,
  dim: AuthorizedDimension,
  rawId: unknown,
): Promise<string | number> {
  const id = parseRecordId(dim, rawId);
  if (id === null) throw recordNotFound(dim, rawId);
  const params: unknown[] = [rc.request.principal.tenantId, id];
  const scope = rowScopeSql(rowScopeOf(rc.request, dim), params, "$1");
  const { rows } = await rc.db.query(
    `SELECT 1 FROM ${ident(dim.tableName)} AS t WHERE t.${ident(TENANT_COLUMN)} = $1 AND t.${ident(dim.idField)} = $2${scope}`,
    params,
  );
  if (!rows.length) throw recordNotFound(dim, rawId);
  return id;
}

/** Which fields of `dim` a revision shows the caller: those of its detail (D), the id, TREC. */
export function revisionFieldFilter(rc: ReadContext, dim: DimensionDef): (code: string) => boolean {
  const rules = rc.view.fields(dim);
  return (code) => {
    const field = dim.fieldsByCode.get(code);
    if (!field) return false;
    return field.isId || field.code === "TREC" || (!field.system && rules.allows(field, "D"));
  };
}

function visibleChanges(changes: Changes, shown: (code: string) => boolean): Changes {
  const out: Changes = {};
  for (const [code, change] of Object.entries(changes)) if (shown(code)) out[code] = change;
  return out;
}

export async function listHistory(
  rc: ReadContext,
  dimCode: string,
  rawId: unknown,
  page: HistoryPaging,
): Promise<HistoryPage> {
  const dim = readableDimension(rc, dimCode);
  const id = await requireHistoryRecord(rc, dim, rawId);
  const key = [rc.request.principal.tenantId, dim.code, String(id)];
  const { rows } = await rc.db.query<HistoryRow>(
    `SELECT "REVISION", "CHANGED_AT", "USER_ID", "OPERATION", "CHANGES" FROM "TB_HISTORY"
      WHERE "TENANT_ID" = $1 AND "DIMENSION" = $2 AND "RECORD_ID" = $3 AND "REVISION" < $6::bigint
      ORDER BY "REVISION" DESC LIMIT $4 OFFSET $5`,
    [...key, page.limit + 1, page.offset, page.before ?? Number.MAX_SAFE_INTEGER],
  );
  const hasMore = rows.length > page.limit;
  const shownRows = hasMore ? rows.slice(0, page.limit) : rows;
  // The total, counted only when the page cannot tell it.
  let total = page.offset + shownRows.length;
  if (hasMore || page.before !== undefined || (shownRows.length === 0 && page.offset > 0)) {
    const counted = await rc.db.query<{ n: number | string }>(
      `SELECT count(*) AS n FROM "TB_HISTORY" WHERE "TENANT_ID" = $1 AND "DIMENSION" = $2 AND "RECORD_ID" = $3`,
      key,
    );
    total = Number(counted.rows[0]?.n ?? 0);
  }
  const shown = revisionFieldFilter(rc, dim);
  return {
    data: shownRows.map((r) => ({
      revision: Number(r.REVISION),
      at: compactTimestamp(r.CHANGED_AT instanceof Date ? r.CHANGED_AT : new Date(r.CHANGED_AT)),
      user: r.USER_ID,
      operation: r.OPERATION,
      changes: visibleChanges(revisionChanges(r.CHANGES), shown),
    })),
    // num_rows echoes the page size asked for, as on lists (decisions.md).
    meta: { total, num_rows: page.limit, offset: page.offset, has_more: hasMore },
  };
}
