// Update (PUT and PATCH): lock the record -> field rules and TREC move -> types and lengths ->
// required fields -> foreign keys -> update with audit fields -> outbox row -> update cascade.
import { BadRequestError } from "../../errors.ts";
import type { DimensionDef, FieldDef, RecordChange, WriteResult } from "../../types.ts";
import { type AuditEvent, auditColumns } from "./audit.ts";
import { recordChanged } from "./change-event.ts";
import { moveRevisions } from "../../history/revisions.ts";
import { step, type WriteContext } from "./context.ts";
import { checkUpdateBody, putClearedFields } from "./field-rules.ts";
import { foreignKeyLookups, type KeyLookup } from "./foreign-keys.ts";
import { refuseOrphaning } from "./naming-records.ts";
import { checkMediaValues } from "./media-values.ts";
import { lockRecord, lockRecordsWhere, type RecordId, updateRow } from "./record-store.ts";
import { requireWrittenInScope } from "./row-scope.ts";
import { currentTrec, requireState, type Trec, updateTransition } from "./state.ts";
import {
  checkAddressableId,
  checkFieldRules,
  checkRequired,
  fieldValues,
  isBlank,
  toColumnValue,
} from "./values.ts";

export type UpdateMode = "put" | "patch";

/**
 * 400 INVALID_REQUEST for a PATCH that changes nothing: no member, or only the record's own id
 * (which an update body may repeat). A PATCH carries the changed fields (spec 4.3), and a write
 * moves N → M, stamps the audit fields and emits an event (spec 3.1): a form saved untouched
 * would have marked its record modified and fired webhooks for no change.
 */
function refuseEmptyPatch(dim: DimensionDef, rawId: unknown, body: Record<string, unknown>): void {
  const members = Object.keys(body);
  const idOnly =
    members.length === 1 && members[0] === dim.idField && String(body[dim.idField]) === String(rawId);
  if (members.length > 0 && !idOnly) return;
  throw new BadRequestError(
    "INVALID_REQUEST",
    `A PATCH of ${dim.code} must change at least one field; its data names ${idOnly ? "only the record's id" : "none"}, so nothing was written.`,
    { field: "data" },
  );
}

type Row = Record<string, unknown>;

export async function updateRecord(
  w: WriteContext,
  dim: DimensionDef,
  rawId: unknown,
  body: Record<string, unknown>,
  mode: UpdateMode,
  /** A command's precondition: the states the record must be in (else INVALID_STATE_TRANSITION). */
  expectFrom?: readonly Trec[],
): Promise<WriteResult> {
  // A revision's restore restores what it may write, which can be nothing (decisions.md §19).
  if (mode === "patch" && w.operation !== "restore") refuseEmptyPatch(dim, rawId, body);
  await step(w, "load");
  const current = await lockRecord(w, dim, rawId);
  const currentId = current[dim.idField] as RecordId;
  if (expectFrom) requireState(currentTrec(current), expectFrom, body.TREC);

  await step(w, "field_rules");
  const changed = checkUpdateBody(w, dim, body, currentId);
  const from = currentTrec(current);
  const to = updateTransition(from, mode, body.TREC);
  const cleared = mode === "put" ? putClearedFields(w, dim, body) : [];
  const values: Row = fieldValues();
  for (const f of changed) values[f.code] = body[f.code];
  if (changed.some((f) => f.isId)) checkAddressableId(dim, values[dim.idField]);
  for (const f of cleared) values[f.code] = null;
  const touched: FieldDef[] = [...changed, ...cleared];

  await step(w, "types");
  checkMediaValues(w, dim, touched, values, current);
  const assignments: Array<[string, unknown]> = touched.map((f) => [
    f.code,
    toColumnValue(f, values[f.code], w.limits.fieldMaxBytes),
  ]);

  checkFieldRules(dim, touched, values, w.ctx.centerDett);

  await step(w, "required");
  checkRequired(dim, touched, values, w.ctx.centerDett);

  await step(w, "foreign_keys");
  // Looked up by the UPDATE itself (as a create's by its INSERT): no statement of their own. A key
  // sent with the value it holds is not looked up again: its parent may have been cancelled since
  // (a cancelled record stays for its children to name), and a PUT must send it back. A restore
  // (C → M) looks up every key, as a create does: the record comes back among the live ones, and
  // one naming a cancelled parent would be a live child of a cancelled record.
  const restoring = from === "C" && to !== "C";
  const keysChanged = changed.filter((f) => String(values[f.code]) !== String(current[f.code] ?? ""));
  const lookups = restoring
    ? restoredKeyLookups(w, dim, current, values, touched, assignments)
    : foreignKeyLookups(w, dim, values, new Set(keysChanged.map((f) => f.code)));

  await step(w, "record");
  const event: AuditEvent = from === "C" ? "restore" : "update";
  assignments.push(...auditColumns(dim.auditStyle, event, w.ctx.principal.userId, w.now, to));
  const record = await updateRow(w, dim, currentId, assignments, lookups);
  await refuseOrphaningKeyChange(w, dim, current, record);
  const newId = record[dim.idField] as RecordId;
  await requireWrittenInScope(w, dim, newId);
  if (dim.history && String(newId) !== String(currentId))
    await moveRevisions(w.tx, dim, w.ctx.principal.tenantId, currentId, newId);
  // A state change: the body asked for a TREC move (N/M → P, C → M) and got it.
  const moved = body.TREC !== undefined && to !== from;
  const operation = w.operation ?? (moved ? "state" : "update");
  const change = await recordChanged(w, dim, "updated", record, false, { operation, before: current });

  await step(w, "cascades");
  const cascaded = await cascadeUpdate(w, dim, current, record, new Set([recordKey(dim, currentId)]));
  return Object.assign(change, { children: [], cascaded });
}

/**
 * The key look-ups of a restore: every foreign key of the record as restored (the body's values
 * over the stored ones), each refused as a create's would be (400 INVALID_FOREIGN_KEY) with what
 * to do: restore the record it names first. A key the body does not write is assigned its own
 * value, so that the UPDATE looks it up.
 */
function restoredKeyLookups(
  w: WriteContext,
  dim: DimensionDef,
  current: Row,
  values: Row,
  touched: readonly FieldDef[],
  assignments: Array<[string, unknown]>,
): KeyLookup[] {
  const restored: Row = { ...current, ...values };
  const lookups = foreignKeyLookups(w, dim, restored).map((l) => ({
    ...l,
    advice: `A restored record's keys must name live records, as a create's: restore that ${l.target.code} record first if it is cancelled, or give ${l.field.code} another value.`,
  }));
  for (const l of lookups)
    if (!touched.some((f) => f.code === l.field.code))
      assignments.push([l.field.code, restored[l.field.code]]);
  return lookups;
}

/**
 * A changed value that records of a dimension outside UPDATE_CASCADE point at (their foreign key
 * names it) would leave them naming nothing: 409 KEY_IN_USE, naming them, and the update rolls back.
 * Counted tenant-wide (referential integrity), cancelled records too (a restore brings them back).
 * Records of an UPDATE_CASCADE dimension outside the caller's write scope, which the cascade does
 * not reach, are refused the same way (decisions.md §17).
 */
function refuseOrphaningKeyChange(
  w: WriteContext,
  dim: DimensionDef,
  before: Row,
  after: Row,
): Promise<void> {
  return refuseOrphaning(w, dim, {
    carried: dim.updateCascade,
    valueLost: (rel) => {
      const old = before[rel.toField];
      return String(old) === String(after[rel.toField]) ? undefined : old;
    },
    advice: (rel, outOfScope) =>
      outOfScope
        ? `which the update cascade (UPDATE_CASCADE) cannot change for you. Nothing was changed: a user whose grant covers those rows (all_rows) can change the key, or those records can be pointed elsewhere first.`
        : `which ${dim.code} does not update with it (UPDATE_CASCADE). Nothing was changed: list ${rel.fromDim} in ${dim.code}'s UPDATE_CASCADE, or point those records elsewhere first.`,
  });
}

function recordKey(dim: DimensionDef, id: unknown): string {
  return `${dim.code}/${String(id)}`;
}

/**
 * UPDATE_CASCADE (decisions.md §5): when a value that children point at changes (the key), the
 * children's foreign keys follow; when the record is restored (C → M), its cancelled children
 * are restored too, and theirs in turn. Each child change is audited and evented.
 */
async function cascadeUpdate(
  w: WriteContext,
  dim: DimensionDef,
  before: Row,
  after: Row,
  seen: Set<string>,
): Promise<RecordChange[]> {
  const changes: RecordChange[] = [];
  const restored = currentTrec(before) === "C" && currentTrec(after) !== "C";
  for (const childCode of dim.updateCascade) {
    const child = w.model.dimensions.get(childCode);
    if (!child) continue;
    for (const rel of dim.reverseRelations.filter((r) => r.fromDim === childCode)) {
      const oldValue = before[rel.toField];
      const newValue = after[rel.toField];
      if (!isBlank(oldValue) && String(oldValue) !== String(newValue)) {
        for (const row of await lockRecordsWhere(w, child, rel.fromField, oldValue)) {
          const trec = currentTrec(row);
          const nextTrec: Trec = trec === "N" ? "M" : trec;
          const assignments: Array<[string, unknown]> = [
            [rel.fromField, newValue],
            ...auditColumns(child.auditStyle, "update", w.ctx.principal.userId, w.now, nextTrec),
          ];
          const updated = await updateRow(w, child, row[child.idField] as RecordId, assignments);
          changes.push(
            await recordChanged(w, child, "updated", updated, false, { operation: "update", before: row }),
          );
        }
      }
      if (restored && !isBlank(newValue)) {
        for (const row of await lockRecordsWhere(w, child, rel.fromField, newValue)) {
          const key = recordKey(child, row[child.idField]);
          if (currentTrec(row) !== "C" || seen.has(key)) continue;
          seen.add(key);
          const assignments = auditColumns(child.auditStyle, "restore", w.ctx.principal.userId, w.now, "M");
          const updated = await updateRow(w, child, row[child.idField] as RecordId, assignments);
          changes.push(
            await recordChanged(w, child, "updated", updated, false, { operation: "state", before: row }),
          );
          changes.push(...(await cascadeUpdate(w, child, row, updated, seen)));
        }
      }
    }
  }
  return changes;
}
