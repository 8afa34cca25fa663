// The frame of every write: permission check and metadata first, then one database transaction
// around the operation; a failure anywhere rolls everything back (records, outbox rows, sequences).
import { authorize } from "../../auth/authorize.ts";
import { ApiError, NotFoundError } from "../../errors.ts";
import type { Services } from "../../services.ts";
import type { Access, DimensionDef, MetadataModel, RequestContext } from "../../types.ts";
import type { StepHook, WriteContext } from "./context.ts";
import { step } from "./context.ts";

export type WriteDeps = Pick<Services, "db" | "metadata" | "config">;

export interface WriteOptions {
  /** Test seam: told each pipeline step; throwing there aborts the write. */
  onStep?: StepHook;
}

export function findDimension(model: MetadataModel, code: string): DimensionDef {
  const dim = model.dimensions.get(code);
  if (!dim) throw new NotFoundError("DIMENSION_NOT_FOUND", `Dimension ${code} does not exist.`);
  return dim;
}

/** Permission for `access` on `dimCode`, then the dimension's metadata. */
export async function authorizeWrite(
  model: MetadataModel,
  ctx: RequestContext,
  dimCode: string,
  access: Access,
  opts: WriteOptions = {},
): Promise<DimensionDef> {
  await step(opts, "authorize");
  authorize(ctx, model, dimCode, access);
  await step(opts, "metadata");
  return findDimension(model, dimCode);
}

/** Runs `fn` in one transaction with a WriteContext; "commit" is the last step before COMMIT. */
export function inWriteTransaction<T>(
  deps: WriteDeps,
  ctx: RequestContext,
  model: MetadataModel,
  opts: WriteOptions,
  fn: (w: WriteContext) => Promise<T>,
): Promise<T> {
  return deps.db.transaction(async (tx) => {
    const w: WriteContext = { tx, ctx, model, now: ctx.now(), trusted: false };
    if (opts.onStep) w.onStep = opts.onStep;
    const result = await fn(w);
    await step(w, "commit");
    return result;
  });
}

/** One write on one dimension: authorize, then the operation in its own transaction. */
export async function runWrite<T>(
  deps: WriteDeps,
  ctx: RequestContext,
  dimCode: string,
  access: Access,
  opts: WriteOptions,
  fn: (w: WriteContext, dim: DimensionDef) => Promise<T>,
): Promise<T> {
  const model = deps.metadata.current();
  const dim = await authorizeWrite(model, ctx, dimCode, access, opts);
  return inWriteTransaction(deps, ctx, model, opts, (w) => fn(w, dim));
}

/** 413 when a batch holds more items than config.maxBatchSize. */
export function checkBatchSize(deps: WriteDeps, count: number): void {
  const max = deps.config.maxBatchSize;
  if (count > max) {
    throw new ApiError(
      413,
      "PAYLOAD_TOO_LARGE",
      "PayloadTooLarge",
      `A batch holds at most ${max} items; got ${count}.`,
      {
        details: { max_batch_size: max, count },
      },
    );
  }
}
