// Batches on one dimension (spec 4.3): one transaction, each record in its own savepoint, so a bad
// record is reported in its result and the others are kept (partial success). PATCH batches and
// batch-deletes lock all their rows first, in id order, so overlapping batches queue instead of
// deadlocking; results stay in request order.
import { awaitAtCommit } from "../../db/deferred.ts";
import { ApiError, PayloadTooLargeError, ValidationError } from "../../errors.ts";
import type { BatchItemResult, BatchResult, RequestContext, WriteResult } from "../../types.ts";
import type { WriteContext } from "./context.ts";
import { createRecord } from "./create.ts";
import { deleteRecord } from "./delete.ts";
import {
  checkBatchSize,
  recordsInCreate,
  runWrite,
  spendRecords,
  type WriteDeps,
  type WriteOptions,
} from "./pipeline.ts";
import { lockRecordIds } from "./record-store.ts";
import { updateRecord } from "./update.ts";

type Item = Record<string, unknown>;

function asObject(item: unknown, index: number): Item {
  if (item === null || typeof item !== "object" || Array.isArray(item)) {
    throw new ValidationError("INVALID_REQUEST", `Item ${index} must be a JSON object.`);
  }
  return item as Item;
}

/**
 * A statement whose answer nobody needs (a savepoint): deferred where the transaction allows it,
 * so that it travels with the next statement instead of costing a round trip of its own.
 */
function sendOnly(w: WriteContext, sql: string): Promise<void> {
  return awaitAtCommit(w.tx, w.tx.query(sql));
}

/** Runs each item in its own savepoint: a refused item is reported, the others go on (imports too). */
export async function eachInSavepoint(
  w: WriteContext,
  items: readonly unknown[],
  status: BatchItemResult["status"],
  idOf: (item: unknown) => string | number | null,
  run: (item: unknown, index: number) => Promise<WriteResult>,
): Promise<BatchResult> {
  const results: BatchItemResult[] = [];
  for (const [index, item] of items.entries()) {
    await sendOnly(w, "SAVEPOINT batch_item");
    try {
      const result = await run(item, index);
      await sendOnly(w, "RELEASE SAVEPOINT batch_item");
      results.push({ index, id: result.recordId, status, result });
    } catch (err) {
      // Anything but a refusal of this record's input (a bug, a lost connection, the request's
      // bounds being spent) ends the batch.
      if (!(err instanceof ApiError) || err instanceof PayloadTooLargeError) throw err;
      await w.tx.query("ROLLBACK TO SAVEPOINT batch_item");
      const error = { error: err.errorType, code: err.code, message: err.message, status: err.status };
      results.push({
        index,
        id: idOf(item),
        status: "failed",
        error: {
          ...error,
          ...(err.field === undefined ? {} : { field: err.field }),
          ...(err.details === undefined ? {} : { details: err.details }),
        },
      });
    }
  }
  const success = results.filter((r) => r.status !== "failed").length;
  return { success, failed: results.length - success, results };
}

function scalarId(v: unknown): string | number | null {
  return typeof v === "string" || typeof v === "number" ? v : null;
}

/** POST /{dim}/batch: creates each record. */
export async function batchCreate(
  deps: WriteDeps,
  ctx: RequestContext,
  dimCode: string,
  items: readonly unknown[],
  opts: WriteOptions = {},
): Promise<BatchResult> {
  checkBatchSize(deps, items.length);
  const model = deps.metadata.current();
  spendRecords(
    deps,
    items.reduce<number>((n, item) => n + recordsInCreate(model, dimCode, item), 0),
  );
  return runWrite(deps, ctx, dimCode, "create", opts, (w, dim) =>
    eachInSavepoint(
      w,
      items,
      "created",
      (item) => (item && typeof item === "object" ? scalarId((item as Item)[dim.idField]) : null),
      (item, i) => createRecord(w, dim, asObject(item, i)),
    ),
  );
}

/** PATCH /{dim}/batch: each item names its record by `id` (or by the id field) and its changes. */
export async function batchUpdate(
  deps: WriteDeps,
  ctx: RequestContext,
  dimCode: string,
  items: readonly unknown[],
  opts: WriteOptions = {},
): Promise<BatchResult> {
  spendRecords(deps, items.length);
  return runWrite(deps, ctx, dimCode, "update", opts, async (w, dim) => {
    const targetOf = (item: unknown): unknown => {
      const o = item && typeof item === "object" ? (item as Item) : {};
      return o.id ?? o[dim.idField];
    };
    await lockRecordIds(w, dim, items.map(targetOf));
    const split = (item: unknown, i: number): { id: unknown; changes: Item } => {
      const { id, ...changes } = asObject(item, i);
      const target = id ?? changes[dim.idField];
      if (target === undefined || target === null) {
        throw new ValidationError("MISSING_PARAMETER", `Item ${i} has no id.`, { field: "id" });
      }
      return { id: target, changes };
    };
    return eachInSavepoint(
      w,
      items,
      "updated",
      (item) => scalarId(targetOf(item)),
      (item, i) => {
        const { id, changes } = split(item, i);
        return updateRecord(w, dim, id, changes, "patch");
      },
    );
  });
}

/** POST /{dim}/batch-delete: soft or force deletes each id. */
export async function batchDelete(
  deps: WriteDeps,
  ctx: RequestContext,
  dimCode: string,
  ids: readonly unknown[],
  force: boolean,
  opts: WriteOptions = {},
): Promise<BatchResult> {
  spendRecords(deps, ids.length);
  const access = force ? "force_delete" : "delete";
  return runWrite(deps, ctx, dimCode, access, opts, async (w, dim) => {
    await lockRecordIds(w, dim, ids);
    return eachInSavepoint(w, ids, "deleted", scalarId, (id) => deleteRecord(w, dim, id, force));
  });
}
