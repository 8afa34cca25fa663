// What a write returns to its caller: the record's fields the caller sees in the detail (D)
// context, plus the id field and the audit fields; insert-cascade children under their dimension.
import { accessView } from "../../auth/access-view.ts";
import type { MetadataModel, RequestContext, WriteOutcome, WriteResult } from "../../types.ts";

export function presentRecord(
  ctx: RequestContext,
  model: MetadataModel,
  dimCode: string,
  record: Record<string, unknown>,
): Record<string, unknown> {
  const dim = model.dimensions.get(dimCode);
  if (!dim) return {};
  const rules = accessView(ctx, model).fields(dim);
  const out: Record<string, unknown> = {};
  for (const f of dim.fields) {
    if (!Object.hasOwn(record, f.code)) continue;
    if (f.isId || f.system || rules.allows(f, "D")) out[f.code] = record[f.code];
  }
  return out;
}

/**
 * The created or updated record as returned, with insert-cascade children; a deleted one as the
 * single DELETE returns it (id and audit fields only), wherever it is answered (also /core/batch).
 */
export function presentResult(
  ctx: RequestContext,
  model: MetadataModel,
  result: WriteResult,
): Record<string, unknown> {
  if (result.action === "deleted") return presentDeleted(model, result);
  const out = presentRecord(ctx, model, result.dim, result.record);
  for (const child of result.children) {
    const list = Array.isArray(out[child.dim]) ? (out[child.dim] as unknown[]) : [];
    list.push(presentResult(ctx, model, child));
    out[child.dim] = list;
  }
  return out;
}

/** Changes made by cascades: enough for a client to follow them (dimension, id, event). */
export function presentCascaded(result: WriteResult) {
  return result.cascaded.map((c) => ({
    dimension: c.dim,
    id: c.recordId,
    action: c.action,
    trec: c.force ? null : (c.record.TREC ?? null),
    event_id: c.eventId,
  }));
}

/** A soft-deleted record as returned: its id field and audit fields (TREC C, LDATA, LOWNER…). */
export function presentDeleted(model: MetadataModel, result: WriteResult): Record<string, unknown> {
  const dim = model.dimensions.get(result.dim);
  if (!dim) return {};
  const out: Record<string, unknown> = {};
  for (const f of dim.fields) {
    if ((f.isId || f.system) && Object.hasOwn(result.record, f.code)) out[f.code] = result.record[f.code];
  }
  return out;
}

/** A write's result with the record as its caller may see it (what adapters answer with). */
export function withVisible(ctx: RequestContext, model: MetadataModel, result: WriteResult): WriteOutcome {
  // The result itself (not a copy): its eventId arrives with the deferred outbox row.
  return Object.assign(result, { visible: result.force ? null : presentResult(ctx, model, result) });
}
