// One outbox row per changed record (spec 6.1, decisions.md §8): the pipeline's "outbox" step.
import { insertOutboxEvent } from "../../events/outbox.ts";
import type { DimensionDef, RecordChange, WriteAction } from "../../types.ts";
import { step, type WriteContext } from "./context.ts";

const KIND = { created: "Created", updated: "Updated", deleted: "Deleted" } as const;

export async function recordChanged(
  w: WriteContext,
  dim: DimensionDef,
  action: WriteAction,
  record: Record<string, unknown>,
  force = false,
): Promise<RecordChange> {
  await step(w, "outbox");
  const recordId = record[dim.idField] as string | number;
  const eventId = await insertOutboxEvent(w.tx, {
    dim: dim.code,
    kind: KIND[action],
    recordId,
    tenantId: w.ctx.principal.tenantId,
    payload: force ? { ...record, force: true } : record,
    createdAt: w.now,
  });
  return { dim: dim.code, action, recordId, record, eventId, force };
}
