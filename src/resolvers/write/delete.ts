// Delete: lock the record -> TREC check -> soft delete (TREC C, audited) or force delete
// (row removed) -> outbox row -> delete cascade (CASCADE_DELETE, the same way, recursively).
import type { DimensionDef, RecordChange, WriteResult } from "../../types.ts";
import { auditColumns } from "./audit.ts";
import { recordChanged } from "./change-event.ts";
import { step, type WriteContext } from "./context.ts";
import { refuseOrphaning } from "./naming-records.ts";
import { deleteRow, lockRecord, lockRecordsWhere, type RecordId, updateRow } from "./record-store.ts";
import { checkDeletable, currentTrec } from "./state.ts";
import { isBlank } from "./values.ts";

type Row = Record<string, unknown>;

export async function deleteRecord(
  w: WriteContext,
  dim: DimensionDef,
  rawId: unknown,
  force: boolean,
): Promise<WriteResult> {
  await step(w, "load");
  const current = await lockRecord(w, dim, rawId);
  await step(w, "field_rules");
  checkDeletable(currentTrec(current), force);
  return deleteLocked(w, dim, current, force, new Set(), w.operation);
}

async function deleteLocked(
  w: WriteContext,
  dim: DimensionDef,
  current: Row,
  force: boolean,
  seen: Set<string>,
  /** What the soft delete's revision records it as (a command's); a delete otherwise. */
  operation?: "command" | "restore",
): Promise<WriteResult> {
  const id = current[dim.idField] as RecordId;
  seen.add(`${dim.code}/${String(id)}`);
  await step(w, "record");
  let change: RecordChange;
  if (force) {
    await refuseOrphaningForceDelete(w, dim, current);
    await deleteRow(w, dim, id);
    // A force delete takes the record's history with it (decisions.md §19: recordChanged).
    change = await recordChanged(w, dim, "deleted", current, true);
  } else {
    await refuseHalfCancel(w, dim, current);
    const columns = auditColumns(dim.auditStyle, "soft_delete", w.ctx.principal.userId, w.now, "C");
    const deleted = await updateRow(w, dim, id, columns);
    change = await recordChanged(w, dim, "deleted", deleted, false, {
      operation: operation ?? "delete",
      before: current,
    });
  }
  await step(w, "cascades");
  return Object.assign(change, { children: [], cascaded: await cascadeDelete(w, dim, current, force, seen) });
}

/**
 * A force delete removes the record for good: records of a dimension outside CASCADE_DELETE whose
 * foreign key names it would name nothing, ever (a soft delete keeps it for them, and a restore
 * brings it back): 409 KEY_IN_USE, naming them, and nothing is deleted, as for a key change
 * outside UPDATE_CASCADE (update.ts). So would records of a CASCADE_DELETE dimension outside the
 * caller's write scope, which the cascade does not reach (cancelled ones too).
 */
function refuseOrphaningForceDelete(w: WriteContext, dim: DimensionDef, current: Row): Promise<void> {
  return refuseOrphaning(w, dim, {
    carried: dim.cascadeDelete,
    valueLost: (rel) => current[rel.toField],
    advice: (rel, outOfScope) =>
      outOfScope
        ? `which the delete cascade (CASCADE_DELETE) cannot delete for you. Nothing was deleted: a user whose grant covers those rows (all_rows) can delete it, or those records can be deleted or pointed elsewhere first.`
        : `which ${dim.code} does not delete with it (CASCADE_DELETE). Nothing was deleted: delete it without force (a cancelled record stays for them to name), point those records elsewhere first, or list ${rel.fromDim} in ${dim.code}'s CASCADE_DELETE.`,
  });
}

/**
 * A soft delete cancels the live children of its CASCADE_DELETE dimensions with it: live children
 * outside the caller's write scope, which the cascade does not reach, would stay live under a
 * cancelled record. 409 KEY_IN_USE, naming their dimension, and nothing is cancelled. (Records of
 * other dimensions may go on naming a cancelled record: it stays for them.)
 */
function refuseHalfCancel(w: WriteContext, dim: DimensionDef, current: Row): Promise<void> {
  return refuseOrphaning(w, dim, {
    carried: dim.cascadeDelete,
    others: false,
    liveOnly: true,
    valueLost: (rel) => current[rel.toField],
    advice: () =>
      `which the delete cascade (CASCADE_DELETE) cannot cancel for you. Nothing was cancelled: a user whose grant covers those rows (all_rows) can delete it, or those records can be cancelled or pointed elsewhere first.`,
  });
}

/**
 * DELETE_CASCADE (decisions.md §5): records of the listed dimensions whose foreign key points at
 * the deleted record go the same way (soft with soft, force with force). Children already
 * cancelled are left alone by a soft delete; a child in processing (P) stops the whole delete.
 */
async function cascadeDelete(
  w: WriteContext,
  dim: DimensionDef,
  parent: Row,
  force: boolean,
  seen: Set<string>,
): Promise<RecordChange[]> {
  const changes: RecordChange[] = [];
  for (const childCode of dim.cascadeDelete) {
    const child = w.model.dimensions.get(childCode);
    if (!child) continue;
    for (const rel of dim.reverseRelations.filter((r) => r.fromDim === childCode)) {
      const value = parent[rel.toField];
      if (isBlank(value)) continue;
      for (const row of await lockRecordsWhere(w, child, rel.fromField, value)) {
        const childId = row[child.idField];
        const trec = currentTrec(row);
        if (seen.has(`${child.code}/${String(childId)}`) || (!force && trec === "C")) continue;
        checkDeletable(trec, force, `${child.code} ${String(childId)}`);
        // The change itself, not a copy: its eventId arrives with the deferred outbox row.
        const result = await deleteLocked(w, child, row, force, seen);
        changes.push(result, ...result.cascaded);
      }
    }
  }
  return changes;
}
