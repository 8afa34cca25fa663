// The write resolvers for one record, shared by REST, GraphQL and commands: each authorizes, then
// runs the pipeline in one transaction and returns the WriteResult (the adapter shapes the body).
import type { RequestContext, WriteResult } from "../../types.ts";
import { createRecord } from "./create.ts";
import { deleteRecord } from "./delete.ts";
import { checkBatchSize, recordsInCreate, runWrite, type WriteDeps, type WriteOptions } from "./pipeline.ts";
import { type UpdateMode, updateRecord } from "./update.ts";

export function createOne(
  deps: WriteDeps,
  ctx: RequestContext,
  dimCode: string,
  data: Record<string, unknown>,
  opts: WriteOptions = {},
): Promise<WriteResult> {
  checkBatchSize(deps, recordsInCreate(deps.metadata.current(), dimCode, data));
  return runWrite(deps, ctx, dimCode, "create", opts, (w, dim) => createRecord(w, dim, data));
}

export function updateOne(
  deps: WriteDeps,
  ctx: RequestContext,
  dimCode: string,
  id: unknown,
  data: Record<string, unknown>,
  mode: UpdateMode,
  opts: WriteOptions = {},
): Promise<WriteResult> {
  return runWrite(deps, ctx, dimCode, "update", opts, (w, dim) => updateRecord(w, dim, id, data, mode));
}

export function deleteOne(
  deps: WriteDeps,
  ctx: RequestContext,
  dimCode: string,
  id: unknown,
  force: boolean,
  opts: WriteOptions = {},
): Promise<WriteResult> {
  const access = force ? "force_delete" : "delete";
  return runWrite(deps, ctx, dimCode, access, opts, (w, dim) => deleteRecord(w, dim, id, force));
}
