// One outbox row per changed record (spec 6.1, decisions.md §8): the pipeline's "outbox" step.
import { insertOutboxEvent } from "../../events/outbox.ts";
import type { DimensionDef, RecordChange, WriteAction } from "../../types.ts";
import { PayloadTooLargeError } from "../../errors.ts";
import { step, type WriteContext, type WriteLimits } from "./context.ts";

const KIND = { created: "Created", updated: "Updated", deleted: "Deleted" } as const;

/**
 * Counts an event's payload against the request's budget: a request whose events would exceed it
 * is refused whole (413), before the outbox (and the broker, and every subscriber) carries them.
 */
function spendEventBudget(limits: WriteLimits, payload: Record<string, unknown>): string {
  const json = JSON.stringify(payload);
  const events = limits.events;
  events.usedBytes += Buffer.byteLength(json);
  if (events.usedBytes > events.maxBytes) {
    throw new PayloadTooLargeError(
      `The events of this request would exceed ${events.maxBytes} bytes; write fewer or smaller records per request.`,
      { max_event_bytes: events.maxBytes },
    );
  }
  return json;
}

export async function recordChanged(
  w: WriteContext,
  dim: DimensionDef,
  action: WriteAction,
  record: Record<string, unknown>,
  force = false,
): Promise<RecordChange> {
  await step(w, "outbox");
  const recordId = record[dim.idField] as string | number;
  const payload = force ? { ...record, force: true } : record;
  const change: RecordChange = { dim: dim.code, action, recordId, record, eventId: "", force };
  const inserting = insertOutboxEvent(w.tx, {
    dim: dim.code,
    kind: KIND[action],
    recordId,
    tenantId: w.ctx.principal.tenantId,
    payload: spendEventBudget(w.limits, payload),
    createdAt: w.now,
  }).then((eventId) => {
    change.eventId = eventId;
  });
  // The outbox row needs no answer before the transaction ends: deferred, it travels with COMMIT
  // on PostgreSQL, and its id is in `change` (the same object the operation returns) by then.
  if (w.tx.defer) w.tx.defer(inserting);
  else await inserting;
  return change;
}
