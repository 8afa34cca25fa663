// Imports (decisions §20): rows read from a received body (the adapter parses CSV or NDJSON into
// ImportRow values, src/rest/import-body.ts) written through the write pipeline that batch creates
// use: each row a create (mode=create) or, with mode=upsert, an update (PATCH) of the record its id
// field names when that record exists. Rows go in batches of MAX_BATCH_SIZE records, one
// transaction each, every row in its own savepoint (batch.ts eachInSavepoint): a refused row is
// counted and listed with its row number, the others are written. atomic=true reads every row
// first (at most IMPORT_ATOMIC_MAX_ROWS) and writes them in one transaction, all or none. The
// writing is bounded on its own (IMPORT_WRITE_TIMEOUT_MS) and stops when its signal is aborted
// (the server closing), in both cases before a batch, never inside one.
import type { AuthorizedDimension } from "../../auth/authorize.ts";
import { ApiError, PayloadTooLargeError, ValidationError } from "../../errors.ts";
import { codecOf } from "../../metadata/codecs.ts";
import type { BatchItemResult, DimensionDef, MetadataModel, RequestContext } from "../../types.ts";
import { eachInSavepoint } from "./batch.ts";
import { createRecord } from "./create.ts";
import {
  authorizeWriteStep,
  inWriteTransaction,
  recordsInCreate,
  type WriteDeps,
  type WriteOptions,
} from "./pipeline.ts";
import { lockRecordIds, parseRecordId } from "./record-store.ts";
import { updateRecord } from "./update.ts";

/** One row of an import: its number in the body (CSV: the header is row 1; NDJSON: its line). */
export interface ImportRow {
  readonly row: number;
  /**
   * The row's members. `textual` (CSV): each cell as text, null for an empty unquoted cell, to be
   * read by its field's type; otherwise (NDJSON) the JSON value as parsed.
   */
  readonly values: unknown;
  readonly textual: boolean;
}

export type ImportMode = "create" | "upsert";

export interface ImportOptions extends WriteOptions {
  mode: ImportMode;
  atomic: boolean;
  /**
   * The writing's bound from the call on (IMPORT_WRITE_TIMEOUT_MS), checked before each batch:
   * 504 IMPORT_WRITE_TIMEOUT past it, the batches written before staying. None: unbounded.
   */
  writeTimeoutMs?: number;
  /** Aborted (its reason an ApiError) to stop before the next batch: the server closing. */
  signal?: AbortSignal;
}

/** An import's dimension, authorized for its mode, with the metadata it was authorized on. */
export interface ImportTarget {
  readonly model: MetadataModel;
  readonly dim: AuthorizedDimension;
}

export interface ImportRowError {
  row: number;
  field: string | null;
  code: string;
  message: string;
}

export interface ImportResult {
  received: number;
  created: number;
  updated: number;
  failed: number;
  /** The first MAX_LISTED_ERRORS refused rows. */
  errors: ImportRowError[];
}

export const MAX_LISTED_ERRORS = 100;

type Body = Record<string, unknown>;

/** A row as its write's body, or refused before the pipeline (not an object): counted in order. */
interface Prepared {
  readonly row: number;
  readonly body: Body;
  readonly refused?: ApiError;
}

function unknownColumn(dim: DimensionDef, name: string, row: number): ValidationError {
  return new ValidationError("INVALID_FIELD", `Column ${name.slice(0, 60)} is not a field of ${dim.code}.`, {
    field: name.slice(0, 60),
    details: { row },
  });
}

/**
 * A row as the body of its write: CSV cells read by their field's codec (an empty unquoted cell
 * leaves the field out of a create and clears it in an update); the system's fields (TREC, audit)
 * left out, as imports do not move a record's state. An unknown CSV column refuses the whole import
 * (it names a column of every row); an unknown NDJSON member refuses its row (the pipeline says so).
 */
function prepare(dim: DimensionDef, input: ImportRow, upsert: boolean): Prepared {
  const { row, values } = input;
  if (values === null || typeof values !== "object" || Array.isArray(values)) {
    return {
      row,
      body: {},
      refused: new ValidationError("INVALID_REQUEST", `Row ${row} is not a JSON object.`),
    };
  }
  const body: Body = {};
  for (const [key, value] of Object.entries(values as Body)) {
    const field = dim.fieldsByCode.get(key);
    if (field?.system) continue;
    if (!input.textual) {
      body[key] = value;
      continue;
    }
    if (!field) throw unknownColumn(dim, key, row);
    if (value === null || value === undefined) {
      if (upsert) body[key] = null;
      continue;
    }
    body[key] = codecOf(field.dataType).fromText(String(value));
  }
  return { row, body };
}

/** An upsert row that creates: its empty cells (null) left out, as a create of CSV leaves them. */
function createBody(body: Body): Body {
  const out: Body = {};
  for (const [key, value] of Object.entries(body)) if (value !== null) out[key] = value;
  return out;
}

function tally(): ImportResult {
  return { received: 0, created: 0, updated: 0, failed: 0, errors: [] };
}

function listError(result: ImportResult, error: ImportRowError): void {
  result.failed++;
  if (result.errors.length < MAX_LISTED_ERRORS) result.errors.push(error);
}

/**
 * Writes `rows` (prepared) in one transaction, each in its own savepoint; returns each row's
 * outcome. With mode=upsert, the records the rows' ids name are locked first (id order) and those
 * that exist are updated.
 */
function writeRows(
  deps: WriteDeps,
  ctx: RequestContext,
  model: MetadataModel,
  dim: AuthorizedDimension,
  rows: readonly Prepared[],
  opts: ImportOptions,
  after?: (outcomes: readonly BatchItemResult[]) => void,
) {
  return inWriteTransaction(deps, ctx, model, opts, async (w) => {
    const existing =
      opts.mode === "upsert"
        ? await lockRecordIds(
            w,
            dim,
            rows.map((r) => r.body[dim.idField]),
          )
        : null;
    const outcome = await eachInSavepoint(
      w,
      rows,
      "created",
      () => null,
      async (item) => {
        const { body, refused } = item as Prepared;
        if (refused) throw refused;
        const id = existing ? parseRecordId(dim, body[dim.idField]) : null;
        if (id !== null && existing?.has(String(id))) {
          const result = await updateRecord(w, dim, id, body, "patch");
          return Object.assign(result, { imported: "updated" as const });
        }
        return Object.assign(await createRecord(w, dim, createBody(body)), { imported: "created" as const });
      },
    );
    after?.(outcome.results);
    return outcome.results;
  });
}

function count(result: ImportResult, rows: readonly Prepared[], outcomes: readonly BatchItemResult[]) {
  for (const o of outcomes) {
    const row = rows[o.index]!.row;
    if (o.status === "failed") {
      const e = o.error!;
      listError(result, { row, field: e.field ?? null, code: e.code, message: e.message });
    } else if ((o.result as { imported?: string } | undefined)?.imported === "updated") result.updated++;
    else result.created++;
  }
}

/** The import's refusal of its body (a malformed row, bad bytes, too large) with what it wrote. */
function withProgress(err: ApiError, result: ImportResult, atomic: boolean): ApiError {
  const written = result.created + result.updated;
  const note =
    atomic || written === 0 ? " Nothing was written." : ` The ${written} rows written before it stay.`;
  return new ApiError(err.status, err.code, err.errorType, `${err.message}${note}`, {
    ...(err.field === undefined ? {} : { field: err.field }),
    details: {
      ...err.details,
      received: result.received,
      created: atomic ? 0 : result.created,
      updated: atomic ? 0 : result.updated,
      failed: result.failed,
    },
    ...(err.headers ? { headers: err.headers } : {}),
  });
}

/** 504 IMPORT_WRITE_TIMEOUT: the rows took longer than `timeoutMs` to write. */
function writeTimeout(timeoutMs: number): ApiError {
  return new ApiError(
    504,
    "IMPORT_WRITE_TIMEOUT",
    "GatewayTimeout",
    `The import's rows took longer than IMPORT_WRITE_TIMEOUT_MS (${timeoutMs} ms) to write; it stopped before its next batch.`,
    { details: { timeout_ms: timeoutMs } },
  );
}

/** What stops the writing before its next batch (an error to throw), or null to go on. */
function writeBound(opts: ImportOptions): () => ApiError | null {
  const { writeTimeoutMs, signal } = opts;
  const deadline =
    writeTimeoutMs === undefined ? Number.POSITIVE_INFINITY : performance.now() + writeTimeoutMs;
  return () => {
    if (signal?.aborted) {
      const reason: unknown = signal.reason;
      return reason instanceof ApiError
        ? reason
        : new ApiError(503, "IMPORT_STOPPED", "ServiceUnavailable", "The import was stopped.");
    }
    return performance.now() > deadline ? writeTimeout(writeTimeoutMs!) : null;
  };
}

/** 400 IMPORT_FAILED: an atomic import with refused rows wrote nothing. */
function atomicFailure(result: ImportResult): ValidationError {
  return new ValidationError(
    "IMPORT_FAILED",
    `${result.failed} of ${result.received} rows were refused; with atomic=true nothing was written.`,
    {
      details: {
        received: result.received,
        created: 0,
        updated: 0,
        failed: result.failed,
        errors: result.errors,
      },
    },
  );
}

/**
 * The import's dimension authorized: create, and update too for mode=upsert. Done before the body
 * is received, so that a caller without the grant is refused before it is stored.
 */
export async function authorizeImport(
  deps: WriteDeps,
  ctx: RequestContext,
  dimCode: string,
  opts: ImportOptions,
): Promise<ImportTarget> {
  const model = deps.metadata.current();
  const dim = await authorizeWriteStep(model, ctx, dimCode, "create", opts);
  if (opts.mode === "upsert") await authorizeWriteStep(model, ctx, dimCode, "update", opts);
  return { model, dim };
}

/**
 * POST /{dim}/import, once authorized (authorizeImport): reads `rows` as they come, writing each
 * batch before reading on (the rows are not held in memory, atomic=true aside). The writing is
 * bounded by opts.writeTimeoutMs and opts.signal, checked before each batch.
 */
export async function importRecords(
  deps: WriteDeps,
  ctx: RequestContext,
  { model, dim }: ImportTarget,
  rows: AsyncIterable<ImportRow>,
  opts: ImportOptions,
): Promise<ImportResult> {
  const result = tally();
  const maxRecords = deps.config.maxBatchSize;
  const atomicMax = deps.config.importAtomicMaxRows;
  const stopped = writeBound(opts);
  let batch: Prepared[] = [];
  let records = 0;
  const flush = async () => {
    if (!batch.length) return;
    const stop = stopped();
    if (stop) throw stop;
    const rows = batch;
    batch = [];
    records = 0;
    count(result, rows, await writeRows(deps, ctx, model, dim, rows, opts));
  };
  try {
    for await (const input of rows) {
      result.received++;
      if (opts.atomic && result.received > atomicMax) {
        throw new PayloadTooLargeError(
          `An import with atomic=true holds at most ${atomicMax} rows; this one has more.`,
          { max_rows: atomicMax, row: input.row },
        );
      }
      const prepared = prepare(dim, input, opts.mode === "upsert");
      const weight = prepared.refused ? 1 : recordsInCreate(model, dim.code, prepared.body);
      if (!opts.atomic && records + weight > maxRecords) await flush();
      batch.push(prepared);
      records += weight;
    }
    if (!opts.atomic) await flush();
    else if (batch.length) {
      const stop = stopped();
      if (stop) throw stop;
    }
  } catch (err) {
    if (err instanceof ApiError) throw withProgress(err, result, opts.atomic);
    throw err;
  }
  if (!opts.atomic) return result;
  // All or none: a refused row throws inside the transaction, which rolls every row back.
  if (batch.length) {
    const all = batch;
    await writeRows(deps, ctx, model, dim, all, opts, (outcomes) => {
      count(result, all, outcomes);
      if (result.failed > 0) throw atomicFailure(result);
    });
  }
  return result;
}
