// The write resolvers for one record, shared by REST, GraphQL and commands: each authorizes, then
// runs the pipeline in one transaction and returns the outcome with the record as the caller may
// see it (the adapter only shapes the body).
import type { RequestContext, WriteOutcome } from "../../types.ts";
import { createRecord } from "./create.ts";
import { deleteRecord } from "./delete.ts";
import { recordsInCreate, runWrite, spendRecords, type WriteDeps, type WriteOptions } from "./pipeline.ts";
import { withVisible } from "./present.ts";
import type { Trec } from "./state.ts";
import { type UpdateMode, updateRecord } from "./update.ts";

export function createOne(
  deps: WriteDeps,
  ctx: RequestContext,
  dimCode: string,
  data: Record<string, unknown>,
  opts: WriteOptions = {},
): Promise<WriteOutcome> {
  spendRecords(deps, recordsInCreate(deps.metadata.current(), dimCode, data));
  return runWrite(deps, ctx, dimCode, "create", opts, async (w, dim) => {
    w.soleRecord = true;
    return withVisible(ctx, w.model, await createRecord(w, dim, data));
  });
}

export function updateOne(
  deps: WriteDeps,
  ctx: RequestContext,
  dimCode: string,
  id: unknown,
  data: Record<string, unknown>,
  mode: UpdateMode,
  opts: WriteOptions = {},
  expectFrom?: readonly Trec[],
): Promise<WriteOutcome> {
  spendRecords(deps, 1);
  return runWrite(deps, ctx, dimCode, "update", opts, async (w, dim) =>
    withVisible(ctx, w.model, await updateRecord(w, dim, id, data, mode, expectFrom)),
  );
}

export function deleteOne(
  deps: WriteDeps,
  ctx: RequestContext,
  dimCode: string,
  id: unknown,
  force: boolean,
  opts: WriteOptions = {},
): Promise<WriteOutcome> {
  const access = force ? "force_delete" : "delete";
  spendRecords(deps, 1);
  return runWrite(deps, ctx, dimCode, access, opts, async (w, dim) =>
    withVisible(ctx, w.model, await deleteRecord(w, dim, id, force)),
  );
}
