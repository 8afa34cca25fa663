// POST /api/v4/core/batch: several operations across dimensions in one transaction, all or
// nothing. A later operation refers to an earlier one's record with "@{ref}" (its id) or
// "@{ref.FIELD}" (a field the caller sees: the id, audit fields and fields with D), where ref is
// the earlier operation's `ref` or its index.
import { z } from "zod";
import { ApiError, BadRequestError } from "../../errors.ts";
import type {
  CoreBatchOperation,
  CoreBatchOperationResult,
  DimensionDef,
  RequestContext,
  WriteResult,
} from "../../types.ts";
import { refuseUnknownMembers } from "./body-members.ts";
import type { WriteContext } from "./context.ts";
import { createRecord } from "./create.ts";
import { deleteRecord } from "./delete.ts";
import {
  authorizeWriteStep,
  type WriteAccess,
  checkBatchSize,
  spendRecords,
  recordsInCreate,
  inWriteTransaction,
  type WriteDeps,
  type WriteOptions,
} from "./pipeline.ts";
import { presentRecord, withVisible } from "./present.ts";
import { lockRecordIds } from "./record-store.ts";
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
/** The payload's members: the operations and the request's scope (spec 4.1). */
const CORE_BATCH_MEMBERS = ["operations", "source", "center_dett"] as const;

/** Checks the payload's shape (not its size, not its records); lists every problem. */
export function parseCoreBatch(body: unknown): CoreBatchOperation[] {
  const payload = payloadSchema.safeParse(body);
  if (!payload.success) {
    throw new BadRequestError("INVALID_REQUEST", "The body must be {operations: [...]}.", {
      errors: [{ field: "operations", message: "an array of operations is required" }],
    });
  }
  // The payload's own members as the operations' (strict): `{"atomic": false}` would be left unread.
  refuseUnknownMembers(body as object, CORE_BATCH_MEMBERS, "a batch's body");
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
    // A create's id is its id field in data (or its template): an id beside it was ignored.
    if (op.method === "POST" && op.id !== undefined)
      problems.push({
        field: `operations.${i}.id`,
        message: "POST takes no id; give the record's id field in data",
      });
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

function accessOf(op: CoreBatchOperation): WriteAccess {
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

/** What a later operation may read of an earlier one's record: its id and what the caller sees. */
interface Referable {
  id: string | number;
  /** The id field, audit fields and fields the caller sees in the detail (D) context. */
  fields: Readonly<Record<string, unknown>>;
}

/** The value of one whole-string reference "@{ref}" / "@{ref.FIELD}" (other strings unchanged). */
function referenceValue(text: string, done: ReadonlyMap<string, Referable>): unknown {
  const m = REFERENCE.exec(text);
  if (!m) return text;
  const target = done.get(m[1]!);
  // Both refusals name the reference as written (details.reference); inOperation adds the
  // operation's index and ref.
  const details = { reference: text };
  if (!target) {
    throw new BadRequestError("INVALID_REFERENCE", `${text} names no earlier operation of this batch.`, {
      details,
    });
  }
  const name = m[2];
  if (name === undefined) return target.id;
  // A hidden field gets the same answer as one that does not exist.
  if (!Object.hasOwn(target.fields, name)) {
    throw new BadRequestError("INVALID_REFERENCE", `${text}: the record of ${m[1]} shows no field ${name}.`, {
      details,
    });
  }
  return target.fields[name];
}

type Holder = Record<string | number, unknown>;

/** Sets an own member (also "__proto__", as JSON.parse does). */
function setOwn(holder: Holder, key: string | number, value: unknown): void {
  Object.defineProperty(holder, key, { value, writable: true, enumerable: true, configurable: true });
}

/**
 * A copy of `value` with every whole-string reference replaced by its value. Iterative, so that
 * no nesting depth can exhaust the stack (the types step refuses values nested too deep).
 */
function resolveRefs(value: unknown, done: ReadonlyMap<string, Referable>): unknown {
  const root: Holder = { value };
  const pending: Array<[Holder, string | number]> = [[root, "value"]];
  for (let next = pending.pop(); next; next = pending.pop()) {
    const [holder, key] = next;
    const v = holder[key];
    if (typeof v === "string") {
      setOwn(holder, key, referenceValue(v, done));
    } else if (Array.isArray(v)) {
      const copy = [...v] as unknown as Holder;
      setOwn(holder, key, copy);
      for (let i = 0; i < v.length; i++) pending.push([copy, i]);
    } else if (v !== null && typeof v === "object") {
      const copy: Holder = { ...(v as Holder) };
      setOwn(holder, key, copy);
      for (const k of Object.keys(copy)) pending.push([copy, k]);
    }
  }
  return root.value;
}

/**
 * Locks the rows the operations name by a literal id, dimension by dimension in code order and in
 * id order within each, before any of them runs: concurrent batches over the same records queue
 * instead of deadlocking. Ids given by reference are locked when their operation runs.
 */
async function lockLiteralTargets(
  w: WriteContext,
  planned: ReadonlyArray<{ op: CoreBatchOperation; dim: DimensionDef }>,
): Promise<void> {
  const byDim = new Map<string, { dim: DimensionDef; ids: unknown[] }>();
  for (const { op, dim } of planned) {
    if (op.method === "POST" || op.id === undefined) continue;
    if (typeof op.id === "string" && REFERENCE.test(op.id)) continue;
    const entry = byDim.get(dim.code) ?? { dim, ids: [] };
    entry.ids.push(op.id);
    byDim.set(dim.code, entry);
  }
  for (const code of [...byDim.keys()].sort()) {
    const { dim, ids } = byDim.get(code)!;
    await lockRecordIds(w, dim, ids);
  }
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
  spendRecords(
    deps,
    ops.reduce((n, op) => n + (op.method === "POST" ? recordsInCreate(model, op.dim, op.data) : 1), 0),
  );
  // Every operation is authorized before anything is written.
  const planned: Array<{ op: CoreBatchOperation; ctx: RequestContext; dim: DimensionDef }> = [];
  for (const [i, op] of ops.entries()) {
    const opCtx = op.source ? { ...ctx, source: op.source } : ctx;
    try {
      planned.push({
        op,
        ctx: opCtx,
        dim: await authorizeWriteStep(model, opCtx, op.dim, accessOf(op), opts),
      });
    } catch (err) {
      throw err instanceof ApiError ? inOperation(err, i, op) : err;
    }
  }
  return inWriteTransaction(deps, ctx, model, opts, async (w) => {
    await lockLiteralTargets(w, planned);
    const done = new Map<string, Referable>();
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
      const referable = {
        id: result.recordId,
        fields: presentRecord(opCtx, w.model, dim.code, result.record),
      };
      done.set(String(index), referable);
      if (op.ref) done.set(op.ref, referable);
      results.push({
        index,
        ref: op.ref ?? null,
        method: op.method,
        dim: dim.code,
        result: withVisible(opCtx, w.model, result),
      });
    }
    return results;
  });
}
