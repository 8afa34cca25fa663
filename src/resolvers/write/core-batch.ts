// POST /api/v4/core/batch: several operations across dimensions in one transaction, all or
// nothing. A later operation refers to an earlier one's record with "@{ref}" (its id) or
// "@{ref.FIELD}" (a field), where ref is the earlier operation's `ref` or its index.
import { z } from "zod";
import { ApiError, BadRequestError } from "../../errors.ts";
import type {
  Access,
  CoreBatchOperation,
  CoreBatchOperationResult,
  DimensionDef,
  RequestContext,
  WriteResult,
} from "../../types.ts";
import { createRecord } from "./create.ts";
import { deleteRecord } from "./delete.ts";
import {
  authorizeWrite,
  checkBatchSize,
  inWriteTransaction,
  type WriteDeps,
  type WriteOptions,
} from "./pipeline.ts";
import { updateRecord } from "./update.ts";

const REF_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,59}$/;
const REFERENCE = /^@\{([A-Za-z_][A-Za-z0-9_]{0,59}|\d+)(?:\.([A-Za-z][A-Za-z0-9_]*))?\}$/;

const operationSchema = z
  .object({
    method: z.preprocess(
      (v) => (typeof v === "string" ? v.toUpperCase() : v),
      z.enum(["POST", "PUT", "PATCH", "DELETE"]),
    ),
    dim: z.string().min(1).max(60),
    id: z.union([z.string(), z.number()]).optional(),
    data: z.record(z.string(), z.unknown()).optional(),
    force: z.boolean().optional(),
    ref: z.string().regex(REF_NAME, "letters, digits and _ (not starting with a digit)").optional(),
    source: z.string().min(1).max(60).optional(),
  })
  .strict();

const payloadSchema = z.object({ operations: z.array(z.unknown()) });

/** Checks the payload's shape (not its size, not its records); lists every problem. */
export function parseCoreBatch(body: unknown): CoreBatchOperation[] {
  const payload = payloadSchema.safeParse(body);
  if (!payload.success) {
    throw new BadRequestError("INVALID_REQUEST", "The body must be {operations: [...]}.", {
      errors: [{ field: "operations", message: "an array of operations is required" }],
    });
  }
  const problems: Array<{ field: string; message: string }> = [];
  const ops: CoreBatchOperation[] = [];
  const refs = new Set<string>();
  payload.data.operations.forEach((raw, i) => {
    const parsed = operationSchema.safeParse(raw);
    if (!parsed.success) {
      for (const issue of parsed.error.issues)
        problems.push({ field: ["operations", i, ...issue.path].join("."), message: issue.message });
      return;
    }
    const op = parsed.data as CoreBatchOperation;
    if (op.method !== "POST" && op.id === undefined)
      problems.push({ field: `operations.${i}.id`, message: `${op.method} needs an id` });
    if (op.method !== "DELETE" && op.data === undefined)
      problems.push({ field: `operations.${i}.data`, message: `${op.method} needs data` });
    if (op.ref !== undefined) {
      if (refs.has(op.ref))
        problems.push({ field: `operations.${i}.ref`, message: `duplicate ref ${op.ref}` });
      refs.add(op.ref);
    }
    ops.push(op);
  });
  if (problems.length) {
    throw new BadRequestError("INVALID_REQUEST", `The batch has ${problems.length} problem(s).`, {
      field: problems[0]!.field,
      errors: problems,
    });
  }
  return ops;
}

function accessOf(op: CoreBatchOperation): Access {
  if (op.method === "POST") return "create";
  if (op.method === "DELETE") return op.force ? "force_delete" : "delete";
  return "update";
}

/** The error of operation `index`, naming it; status and code stay those of the cause. */
function inOperation(err: ApiError, index: number, op: CoreBatchOperation): ApiError {
  return new ApiError(
    err.status,
    err.code,
    err.errorType,
    `Operation ${index} (${op.method} ${op.dim}): ${err.message}`,
    {
      ...(err.field !== undefined ? { field: err.field } : {}),
      ...(err.errors !== undefined ? { errors: err.errors } : {}),
      ...(err.extra !== undefined ? { extra: err.extra } : {}),
      details: { ...err.details, operation: index, ...(op.ref ? { ref: op.ref } : {}) },
      cause: err,
    },
  );
}

/** Replaces whole-string references "@{ref}" / "@{ref.FIELD}" with earlier results' values. */
function resolveRefs(value: unknown, done: ReadonlyMap<string, WriteResult>): unknown {
  if (typeof value === "string") {
    const m = REFERENCE.exec(value);
    if (!m) return value;
    const target = done.get(m[1]!);
    if (!target) {
      throw new BadRequestError("INVALID_REFERENCE", `${value} names no earlier operation of this batch.`);
    }
    if (m[2] === undefined) return target.recordId;
    if (!(m[2] in target.record)) {
      throw new BadRequestError("INVALID_REFERENCE", `${value}: the record of ${m[1]} has no field ${m[2]}.`);
    }
    return target.record[m[2]];
  }
  if (Array.isArray(value)) return value.map((v) => resolveRefs(v, done));
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, resolveRefs(v, done)]));
  }
  return value;
}

export async function runCoreBatch(
  deps: WriteDeps,
  ctx: RequestContext,
  body: unknown,
  opts: WriteOptions = {},
): Promise<CoreBatchOperationResult[]> {
  const ops = parseCoreBatch(body);
  checkBatchSize(deps, ops.length);
  const model = deps.metadata.current();
  // Every operation is authorized before anything is written.
  const planned: Array<{ op: CoreBatchOperation; ctx: RequestContext; dim: DimensionDef }> = [];
  for (const [i, op] of ops.entries()) {
    const opCtx = op.source ? { ...ctx, source: op.source } : ctx;
    try {
      planned.push({ op, ctx: opCtx, dim: await authorizeWrite(model, opCtx, op.dim, accessOf(op), opts) });
    } catch (err) {
      throw err instanceof ApiError ? inOperation(err, i, op) : err;
    }
  }
  return inWriteTransaction(deps, ctx, model, opts, async (w) => {
    const done = new Map<string, WriteResult>();
    const results: CoreBatchOperationResult[] = [];
    for (const [index, { op, ctx: opCtx, dim }] of planned.entries()) {
      const ow = { ...w, ctx: opCtx };
      let result: WriteResult;
      try {
        const id = resolveRefs(op.id, done);
        const data = (resolveRefs(op.data ?? {}, done) ?? {}) as Record<string, unknown>;
        if (op.method === "POST") result = await createRecord(ow, dim, data);
        else if (op.method === "DELETE") result = await deleteRecord(ow, dim, id, op.force === true);
        else result = await updateRecord(ow, dim, id, data, op.method === "PUT" ? "put" : "patch");
      } catch (err) {
        throw err instanceof ApiError ? inOperation(err, index, op) : err;
      }
      done.set(String(index), result);
      if (op.ref) done.set(op.ref, result);
      results.push({ index, ref: op.ref ?? null, method: op.method, dim: dim.code, result });
    }
    return results;
  });
}
