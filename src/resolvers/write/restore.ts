// restoreRevision: POST /{dim}/{id}/history/{revision}/restore and GraphQL
// {DIM}_restore_revision (decisions.md §19): a revision's "after" values written back as a PATCH
// through the write pipeline (field rules, templates, cascades, event), recorded as a new revision
// of operation `restore`. Needs the write grant.
import { accessView } from "../../auth/access-view.ts";
import { BadRequestError, NotFoundError, ValidationError } from "../../errors.ts";
import { type Changes, revisionChanges } from "../../history/revisions.ts";
import type { RequestContext, WriteOutcome } from "../../types.ts";
import { runWrite, spendRecords, type WriteDeps, type WriteOptions } from "./pipeline.ts";
import { withVisible } from "./present.ts";
import { lockRecord } from "./record-store.ts";
import { currentTrec } from "./state.ts";
import { updateRecord } from "./update.ts";

/** Revision numbers are INTEGER (TB_HISTORY.REVISION). */
const MAX_REVISION = 2_147_483_647;

/**
 * A revision number from a path or argument: a whole number from 1 written as the history lists
 * it (canonical decimal: no leading zero, sign, space or fraction; `01` is not revision 1), else
 * 400 INVALID_PARAMETER. GraphQL's Int grammar already refuses such spellings.
 */
export function parseRevision(raw: unknown): number {
  const n =
    typeof raw === "number"
      ? raw
      : typeof raw === "string" && /^[1-9]\d{0,9}$/.test(raw)
        ? Number(raw)
        : Number.NaN;
  if (!Number.isSafeInteger(n) || n < 1 || n > MAX_REVISION) {
    throw new BadRequestError(
      "INVALID_PARAMETER",
      `revision must be a whole number from 1 to ${MAX_REVISION}, written without leading zeros, sign or spaces (as the history lists it); got '${String(raw).slice(0, 40)}'.`,
      { field: "revision" },
    );
  }
  return n;
}

/**
 * The refusal of a revision's restore on a cancelled record: an update's own message ("only
 * restored, by PATCH with TREC M") reads as if this restore were that, so this one says what
 * to do, in both APIs' words: the `restore` command, then the revision.
 */
function cancelledRecord(dimCode: string, id: string | number, source: string | null): ValidationError {
  const shownId = JSON.stringify(id);
  const rest = `POST /api/v4/core/${dimCode}/command/restore${source ? `?source=${encodeURIComponent(source)}` : ""} with {"id": ${shownId}}`;
  const graphql = `${dimCode}_command(${source ? `source: ${JSON.stringify(source)}, ` : ""}name: "restore", id: ${shownId})`;
  return new ValidationError(
    "INVALID_STATE_TRANSITION",
    `${dimCode} ${String(id)} is cancelled (TREC C): restore the record first with the restore command (REST: ${rest}; GraphQL: ${graphql}), then restore its revision.`,
    { field: "TREC", details: { from: "C", to: "M", command: "restore" } },
  );
}

/**
 * Writes revision `rawRevision` of the record back. The values restored are the revision's
 * "after" values of the fields the caller may both read in detail (D: what the history shows it)
 * and modify (M); the id, TREC and the audit fields are never restored (a state moves only by
 * the moves of decisions.md §4), nor a MEDIA field (a file is uploaded, not written). A cancelled
 * record (TREC C) is refused (400 INVALID_STATE_TRANSITION) with a message naming what to do:
 * restore it first (the `restore` command), then its revision.
 */
export async function restoreRevision(
  deps: WriteDeps,
  ctx: RequestContext,
  dimCode: string,
  rawId: unknown,
  rawRevision: unknown,
  opts: WriteOptions = {},
): Promise<WriteOutcome> {
  const revision = parseRevision(rawRevision);
  spendRecords(deps, 1);
  return runWrite(deps, ctx, dimCode, "update", { ...opts, operation: "restore" }, async (w, dim) => {
    const current = await lockRecord(w, dim, rawId);
    const id = current[dim.idField] as string | number;
    const { rows } = await w.tx.query<{ CHANGES: Changes | string }>(
      `SELECT "CHANGES" FROM "TB_HISTORY"
        WHERE "TENANT_ID" = $1 AND "DIMENSION" = $2 AND "RECORD_ID" = $3 AND "REVISION" = $4`,
      [ctx.principal.tenantId, dim.code, String(id), revision],
    );
    const row = rows[0];
    if (!row) {
      throw new NotFoundError(
        "REVISION_NOT_FOUND",
        `${dim.code} ${String(id)} has no revision ${revision}.`,
        {
          details: { dimension: dim.code, id, revision },
        },
      );
    }
    if (currentTrec(current) === "C") throw cancelledRecord(dim.code, id, ctx.source);
    const changes = revisionChanges(row.CHANGES);
    const rules = accessView(ctx, w.model).fields(dim);
    const body: Record<string, unknown> = {};
    for (const [code, change] of Object.entries(changes)) {
      const field = dim.fieldsByCode.get(code);
      if (!field || field.system || field.isId) continue;
      if (!rules.allows(field, "D") || !rules.allows(field, "M")) continue;
      // A MEDIA value describes an uploaded file: it is set by uploading one, never written back
      // (the earlier file may be gone with the clean-up). Left as it is, as a field the caller may
      // not change is: the restore restores what it can.
      if (field.dataType === "MEDIA") continue;
      body[code] = change.after;
    }
    return withVisible(ctx, w.model, await updateRecord(w, dim, id, body, "patch"));
  });
}
