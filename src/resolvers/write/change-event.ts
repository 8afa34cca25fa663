// One outbox row per changed record (spec 6.1, decisions.md §8): the pipeline's "outbox" step.
import { awaitAtCommit } from "../../db/deferred.ts";
import { FORCE_DELETE_MARK, insertOutboxEvent } from "../../events/outbox.ts";
import type { DimensionDef, RecordChange, WriteAction } from "../../types.ts";
import { PayloadTooLargeError } from "../../errors.ts";
import { perDefinition } from "../../metadata/per-definition.ts";
import { CounterValue } from "./templates.ts";
import { step, type WriteContext, type WriteLimits } from "./context.ts";
import {
  changedFields,
  type RevisionOperation,
  revisionInsert,
  revisionsRemoval,
  sameValue,
} from "../../history/revisions.ts";

const KIND = { created: "Created", updated: "Updated", deleted: "Deleted" } as const;

/**
 * Counts an event's payload against the request's budget: a request whose events would exceed it
 * is refused whole (413), before the outbox (and the broker, and every subscriber) carries them.
 */
function spendEventBudget(limits: WriteLimits, payload: Record<string, unknown>): string {
  const json = JSON.stringify(payload);
  spendEventBytes(limits, Buffer.byteLength(json));
  return json;
}

/**
 * The request's event budget, its one entry point for the bytes of each event it writes: spent
 * exactly when the payload is known before the write (spendEventBytes), or, for a payload the
 * database builds (insertRowWithEvent), held at its largest possible size before the write
 * (reserveEventBytes) and settled to the exact size after it, or released when nothing was written.
 */
function spendEventBytes(limits: WriteLimits, bytes: number): void {
  const events = limits.events;
  events.usedBytes += bytes;
  if (events.usedBytes > events.maxBytes) {
    throw new PayloadTooLargeError(
      `The events of this request would exceed ${events.maxBytes} bytes; write fewer or smaller records per request.`,
      { max_event_bytes: events.maxBytes },
    );
  }
}

/** Bytes of the request's event budget held for an event not yet written (reserveEventBytes). */
export interface HeldEventBytes {
  /** The event was written with `payload`: the hold becomes its exact size. */
  settle(payload: Record<string, unknown>): void;
  /** Nothing was written: the hold goes back to the budget. */
  release(): void;
}

/**
 * Holds `bound` bytes (an event's largest possible size) of the request's budget for an event the
 * database will build; null, holding nothing, when they do not fit (the caller then takes the
 * path that spends the exact size). Once held, settle or release it exactly once.
 */
export function reserveEventBytes(limits: WriteLimits, bound: number): HeldEventBytes | null {
  const events = limits.events;
  if (events.usedBytes + bound > events.maxBytes) return null;
  events.usedBytes += bound;
  let held = true;
  const giveBack = () => {
    if (!held) throw new Error("Held event bytes are settled or released once.");
    held = false;
    events.usedBytes -= bound;
  };
  return {
    settle(payload) {
      giveBack();
      // The event is written (it fit its bound): it counts as it is, for the request's later writes.
      events.usedBytes += Buffer.byteLength(JSON.stringify(payload));
    },
    release: giveBack,
  };
}

/** What a change's revision records: its operation and the record before it (null: a create). */
export interface RevisionOf {
  operation: RevisionOperation;
  before: Record<string, unknown> | null;
}

/**
 * The change's outbox row and, in the same statement, its record history: the record's revision
 * (the fields that differ between `revision.before` and `record`; none when the dimension keeps
 * no history, TB_DIM.HISTORY false), or for a force delete the removal of the record's history.
 */
export async function recordChanged(
  w: WriteContext,
  dim: DimensionDef,
  action: WriteAction,
  record: Record<string, unknown>,
  force = false,
  revision?: RevisionOf,
): Promise<RecordChange> {
  await step(w, "outbox");
  const recordId = record[dim.idField] as string | number;
  const tenantId = w.ctx.principal.tenantId;
  const history = force
    ? revisionsRemoval(dim, tenantId, recordId)
    : revision && dim.history
      ? revisionInsert({
          dim,
          tenantId,
          recordId,
          userId: w.ctx.principal.userId,
          at: w.now,
          operation: revision.operation,
          changes: changedFields(dim, revision.before, record),
        })
      : undefined;
  const payload = force ? { ...record, [FORCE_DELETE_MARK]: true } : record;
  const previous =
    action === "updated" && revision?.before ? previousValues(dim, revision.before, record) : null;
  const change: RecordChange = { dim: dim.code, action, recordId, record, eventId: "", force };
  const inserting = insertOutboxEvent(
    w.tx,
    {
      dim: dim.code,
      kind: KIND[action],
      recordId,
      tenantId,
      payload: spendEventBudget(w.limits, payload),
      createdAt: w.now,
      ...(previous ? { previous: spendEventBudget(w.limits, previous) } : {}),
    },
    history,
  ).then((eventId) => {
    change.eventId = eventId;
  });
  // The outbox row needs no answer before the transaction ends: deferred, it travels with COMMIT
  // on PostgreSQL, and its id is in `change` (the same object the operation returns) by then.
  await awaitAtCommit(w.tx, inserting);
  return change;
}

/**
 * An update's values before it, of the record's fields that changed (system fields such as a row
 * scope's CENTRO_DETT included), or null when none did: what an event's PREVIOUS carries, so that
 * a row leaving a row scope is judged on its state before the change too (decisions.md §17).
 */
function previousValues(
  dim: DimensionDef,
  before: Record<string, unknown>,
  after: Record<string, unknown>,
): Record<string, unknown> | null {
  let previous: Record<string, unknown> | null = null;
  for (const f of dim.fields) {
    if (!(f.code in before)) continue;
    if (sameValue(before[f.code], after[f.code])) continue;
    previous ??= {};
    previous[f.code] = before[f.code] ?? null;
  }
  return previous;
}

/** The longest text of a bigint (an identity id, a counter's number): "-9223372036854775808". */
const BIGINT_DIGITS = 20;

/**
 * At most how many bytes the JSON of the record `columns` create has (its Created event's
 * payload, JSON.stringify of the row): each value as given (a value comes back as it went in:
 * text, a number, JSON text whose round trip through jsonb keeps its length), a value the
 * database makes at its longest (an identity id, a counter's digits), any other field null.
 */
export function createdEventBytesBound(dim: DimensionDef, columns: ReadonlyArray<[string, unknown]>): number {
  const bound = createdEventBoundOf(dim);
  let bytes = bound.absent;
  for (const [code, v] of columns) {
    const f = bound.fields.get(code);
    if (!f || v === undefined) continue;
    bytes -= f.absent;
    if (v instanceof CounterValue)
      bytes += Buffer.byteLength(JSON.stringify(v.prefix + v.suffix)) + Math.max(BIGINT_DIGITS, v.width ?? 0);
    else if (typeof v === "string" && f.jsonText) bytes += Buffer.byteLength(v);
    else bytes += Buffer.byteLength(JSON.stringify(v) ?? "null");
  }
  return bytes;
}

interface CreatedEventBound {
  /** The payload's bytes when no column is given: braces, keys, separators, absent values. */
  absent: number;
  /** Per field: the bytes its absent value counts, and whether its given text is JSON as is. */
  fields: Map<string, { absent: number; jsonText: boolean }>;
}

/** What createdEventBytesBound needs of a dimension, worked out once per definition. */
const createdEventBoundOf = perDefinition((dim): CreatedEventBound => {
  const bound: CreatedEventBound = { absent: 2, fields: new Map() };
  for (const f of dim.fields) {
    const absent = f.isId && dim.idType === "INTEGER" ? BIGINT_DIGITS : 4;
    bound.absent += Buffer.byteLength(JSON.stringify(f.code)) + 2 + absent;
    bound.fields.set(f.code, { absent, jsonText: f.dataType === "JSON" || f.dataType === "MEDIA" });
  }
  return bound;
});
