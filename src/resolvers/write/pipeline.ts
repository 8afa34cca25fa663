// The frame of every write: permission check and metadata first, then one database transaction
// around the operation; a failure anywhere rolls everything back (records, outbox rows, sequences).
import { type AuthorizedDimension, authorizeWrite } from "../../auth/authorize.ts";
import { NotFoundError, PayloadTooLargeError } from "../../errors.ts";
import type { Services } from "../../services.ts";
import type { Access, DimensionDef, MetadataModel, RequestContext } from "../../types.ts";
import type { RequestBudget, StepHook, WriteContext } from "./context.ts";
import { step, writeLimits } from "./context.ts";
import { bodyValue } from "./values.ts";

/**
 * What a write needs; `budget` when the request is several writes (a GraphQL operation): they
 * spend one request's bounds together. Without it, each call is a request of its own.
 */
export type WriteDeps = Pick<Services, "db" | "metadata" | "config"> &
  Partial<Pick<Services, "creates">> & { budget?: RequestBudget };

export interface WriteOptions {
  /** Test seam: told each pipeline step; throwing there aborts the write. */
  onStep?: StepHook;
  /** What the record's revision records the write as (a command, a revision's restore). */
  operation?: WriteContext["operation"];
}

export function findDimension(model: MetadataModel, code: string): DimensionDef {
  const dim = model.dimensions.get(code);
  if (!dim) throw new NotFoundError("DIMENSION_NOT_FOUND", `Dimension ${code} does not exist.`);
  return dim;
}

export type WriteAccess = Exclude<Access, "read" | "metadata">;

/** Permission for `access` on `dimCode`, then the dimension's metadata: the pipeline's proof. */
export async function authorizeWriteStep(
  model: MetadataModel,
  ctx: RequestContext,
  dimCode: string,
  access: WriteAccess,
  opts: WriteOptions = {},
): Promise<AuthorizedDimension> {
  await step(opts, "authorize");
  const dim = authorizeWrite(ctx, model, dimCode, access);
  await step(opts, "metadata");
  return dim;
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
    const w: WriteContext = {
      tx,
      ctx,
      model,
      now: ctx.now(),
      trusted: false,
      limits: writeLimits(deps.config, deps.budget),
    };
    if (opts.onStep) w.onStep = opts.onStep;
    if (opts.operation) w.operation = opts.operation;
    if (deps.creates) w.creates = deps.creates;
    const result = await fn(w);
    if (!w.committed) await step(w, "commit");
    return result;
  });
}

/** One write on one dimension: authorize, then the operation in its own transaction. */
export async function runWrite<T>(
  deps: WriteDeps,
  ctx: RequestContext,
  dimCode: string,
  access: WriteAccess,
  opts: WriteOptions,
  fn: (w: WriteContext, dim: AuthorizedDimension) => Promise<T>,
): Promise<T> {
  const model = deps.metadata.current();
  const dim = await authorizeWriteStep(model, ctx, dimCode, access, opts);
  return inWriteTransaction(deps, ctx, model, opts, (w) => fn(w, dim));
}

/**
 * 413 when one request would write more than config.maxBatchSize records: the items of a batch,
 * and the children each create carries for INSERT_CASCADE, all count (checked before any write).
 */
export function checkBatchSize(deps: WriteDeps, count: number): void {
  const max = deps.config.maxBatchSize;
  const earlier = deps.budget?.records.used ?? 0;
  if (earlier + count > max) {
    throw new PayloadTooLargeError(
      earlier
        ? `A request writes at most ${max} records, cascaded children included; its earlier operations wrote ${earlier} and this one holds ${count}.`
        : `A request writes at most ${max} records, cascaded children included; this one holds ${count}.`,
      { max_batch_size: max, count: earlier + count },
    );
  }
}

/**
 * checkBatchSize, then the records are spent from the request's budget (when it has one): the
 * count a write stands for is taken before it runs, whatever its outcome.
 */
export function spendRecords(deps: WriteDeps, count: number): void {
  checkBatchSize(deps, count);
  if (deps.budget) deps.budget.records.used += count;
}

/**
 * The records a create body stands for: itself and, through INSERT_CASCADE, its children and
 * theirs. Malformed lists count as nothing here; the pipeline refuses them with their own error.
 */
export function recordsInCreate(model: MetadataModel, dimCode: string, body: unknown, depth = 0): number {
  const dim = model.dimensions.get(dimCode);
  if (!dim || depth > 8 || body === null || typeof body !== "object" || Array.isArray(body)) return 1;
  let count = 1;
  for (const code of dim.insertCascade) {
    const list = bodyValue(body as Record<string, unknown>, code);
    if (!Array.isArray(list)) continue;
    for (const item of list) count += recordsInCreate(model, code, item, depth + 1);
  }
  return count;
}
