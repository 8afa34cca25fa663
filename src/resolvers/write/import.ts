// Imports (decisions §20): rows read from a received body (the adapter parses CSV or NDJSON into
// ImportRow values, src/rest/import-body.ts) written through the write pipeline that batch creates
// use: each row a create (mode=create) or, with mode=upsert, an update (PATCH) of the record its id
// field names when that record exists (none when the row holds its stored values: unchanged).
// Rows go in batches of at most MAX_BATCH_SIZE records whose events fit REQUEST_EVENTS_MAX_BYTES,
// one transaction each, every row in its own savepoint (batch.ts eachInSavepoint): a refused row
// is counted and listed with its row number, the others are written. atomic=true reads every row
// first (at most IMPORT_ATOMIC_MAX_ROWS) and writes them in one transaction, all or none. The
// writing is bounded on its own (IMPORT_WRITE_TIMEOUT_MS) and stops when its signal is aborted
// (the server closing), in both cases before a batch, never inside one.
import { isDeepStrictEqual } from "node:util";
import type { AuthorizedDimension } from "../../auth/authorize.ts";
import { ident } from "../../db/sql.ts";
import { ApiError, ConflictError, PayloadTooLargeError, ValidationError } from "../../errors.ts";
import { codecOf } from "../../metadata/codecs.ts";
import { TENANT_COLUMN } from "../../metadata/data-types.ts";
import type {
  BatchItemResult,
  DimensionDef,
  MetadataModel,
  RequestContext,
  WriteResult,
} from "../../types.ts";
import { eachInSavepoint } from "./batch.ts";
import type { WriteContext } from "./context.ts";
import { createRecord } from "./create.ts";
import {
  authorizeWriteStep,
  inWriteTransaction,
  recordsInCreate,
  type WriteDeps,
  type WriteOptions,
} from "./pipeline.ts";
import { parseRecordId, type RecordId } from "./record-store.ts";
import { writeScopeSql } from "./row-scope.ts";
import { updateRecord } from "./update.ts";
import { rowToRecord } from "./values.ts";

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
  /**
   * When that bound started (performance.now()): the route starts it once the body is in, so that
   * waiting for the tenant's heavy lane counts too. None: the call.
   */
  writeStartedAt?: number;
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
  /** Upsert rows that named a record holding their values already: nothing written. */
  unchanged: number;
  failed: number;
  /** The first MAX_LISTED_ERRORS refused rows. */
  errors: ImportRowError[];
  /** What the import did not do that the body asked (columns it does not write); absent if nothing. */
  warnings?: ImportWarning[];
}

/** A warning of an import's answer: the shape of a metadata write's (types.ts MetadataWarning). */
export interface ImportWarning {
  code: string;
  message: string;
  details?: Record<string, unknown>;
}

export const MAX_LISTED_ERRORS = 100;

type Body = Record<string, unknown>;

/** A row as its write's body, or refused before the pipeline (not an object): counted in order. */
interface Prepared {
  readonly row: number;
  readonly body: Body;
  readonly refused?: ApiError;
}

/** An unknown CSV column: the header (row 1) names it. */
function unknownColumn(dim: DimensionDef, name: string): ValidationError {
  return new ValidationError("INVALID_FIELD", `Column ${name.slice(0, 60)} is not a field of ${dim.code}.`, {
    field: name.slice(0, 60),
    details: { row: 1 },
  });
}

/**
 * A row as the body of its write: CSV cells read by their field's codec (an empty unquoted cell
 * leaves the field out of a create and clears it in an update); the system's fields (TREC, audit,
 * the row scope's CENTRO_DETT and AMBIENTE) left out, as no write of a caller sets them (an export
 * holds them, and imports back), and added to `ignored` for the answer to say so. An unknown CSV
 * column refuses the whole import (it names a column of every row); an unknown NDJSON member
 * refuses its row (the pipeline says so).
 */
function prepare(dim: DimensionDef, input: ImportRow, upsert: boolean, ignored: Set<string>): Prepared {
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
    if (field?.system) {
      ignored.add(field.code);
      continue;
    }
    if (!input.textual) {
      body[key] = value;
      continue;
    }
    if (!field) throw unknownColumn(dim, key);
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
  return { received: 0, created: 0, updated: 0, unchanged: 0, failed: 0, errors: [] };
}

/** The answer's warning for the system fields the rows gave, which the import did not write. */
function ignoredWarning(fields: ReadonlySet<string>): ImportWarning {
  const list = [...fields];
  return {
    code: "FIELDS_IGNORED",
    message: `${list.join(", ")} ${list.length === 1 ? "is a system field" : "are system fields"} (a record's state TREC, audit fields, the row scope's CENTRO_DETT and AMBIENTE) that no write of a caller sets; the import left ${list.length === 1 ? "it" : "them"} as stored (a create sets them itself).`,
    details: { fields: list },
  };
}

function listError(result: ImportResult, error: ImportRowError): void {
  result.failed++;
  if (result.errors.length < MAX_LISTED_ERRORS) result.errors.push(error);
}

type Row = Record<string, unknown>;

/** The ids the rows name (those that can name a record), each once. */
function idsOf(dim: DimensionDef, rows: readonly Prepared[]): RecordId[] {
  const ids = new Set<RecordId>();
  for (const r of rows) {
    const id = parseRecordId(dim, r.body[dim.idField]);
    if (id !== null) ids.add(id);
  }
  return [...ids];
}

/**
 * mode=upsert: the records the rows' ids name within the caller's write scope (one outside is as
 * absent as in an update), by id as text, locked in id order (writers of overlapping sets of
 * records queue instead of deadlocking), as stored.
 */
async function lockStored(
  w: WriteContext,
  dim: DimensionDef,
  ids: readonly RecordId[],
): Promise<Map<string, Row>> {
  if (!ids.length) return new Map();
  const params: unknown[] = [w.ctx.principal.tenantId, ids];
  const scope = writeScopeSql(w, dim, params);
  const res = await w.tx.query<Row>(
    `SELECT * FROM ${ident(dim.tableName)} AS t WHERE t.${ident(TENANT_COLUMN)} = $1 AND t.${ident(dim.idField)} = ANY($2)${scope}
      ORDER BY t.${ident(dim.idField)} FOR UPDATE OF t`,
    params,
  );
  return new Map(res.rows.map((r) => [String(r[dim.idField]), rowToRecord(dim, r)]));
}

/** Of `ids`, those a record of the tenant holds, whatever its state or scope (the unique key's). */
async function takenIds(w: WriteContext, dim: DimensionDef, ids: readonly RecordId[]): Promise<Set<string>> {
  if (!ids.length) return new Set();
  const res = await w.tx.query<{ id: unknown }>(
    `SELECT ${ident(dim.idField)} AS "id" FROM ${ident(dim.tableName)} WHERE ${ident(TENANT_COLUMN)} = $1 AND ${ident(dim.idField)} = ANY($2)`,
    [w.ctx.principal.tenantId, ids],
  );
  return new Set(res.rows.map((r) => String(r.id)));
}

/** The id a create row gives (a STRING id the caller may send on create), as text; else null. */
function givenId(dim: AuthorizedDimension, body: Body): string | null {
  const raw = body[dim.idField];
  const field = dim.fieldsByCode.get(dim.idField);
  if (dim.idType === "INTEGER" || typeof raw !== "string" || !field || !dim.rules.allows(field, "N"))
    return null;
  const id = parseRecordId(dim, raw);
  return id === null ? null : String(id);
}

/** 409 DUPLICATE_KEY, as the INSERT would answer it (db-errors.ts), for a row whose id is taken. */
function duplicateKey(dim: DimensionDef): ConflictError {
  return new ConflictError("DUPLICATE_KEY", `A ${dim.code} record with this ${dim.idField} exists already.`, {
    field: dim.idField,
  });
}

/**
 * An upsert row as the body of its update: a field the caller may read (L or D) but not modify
 * (no M) whose value equals the stored one is left out, as it changes nothing (an exported file
 * holds every listed field, and imports back). A different value stays, refused by the pipeline
 * (FIELD_NOT_MODIFIABLE); so does a field the caller may not read (left out when equal, it would
 * tell the caller what it holds).
 */
function updateBody(dim: AuthorizedDimension, body: Body, stored: Row): Body {
  let out: Body | null = null;
  for (const [key, value] of Object.entries(body)) {
    const field = dim.fieldsByCode.get(key);
    // The id: an update takes its own id back already (checkUpdateBody).
    if (!field || field.system || field.isId || dim.rules.allows(field, "M")) continue;
    if (!dim.rules.allows(field, "L") && !dim.rules.allows(field, "D")) continue;
    if (!isDeepStrictEqual(value, stored[key] ?? null)) continue;
    out ??= { ...body };
    delete out[key];
  }
  return out ?? body;
}

/**
 * Whether an upsert row's update body (updateBody's) would change nothing of the stored record:
 * every member a field the caller may read (L or D) holding its stored value, the id aside (it
 * named the record). A member the caller may not read, or that names no field, goes to the
 * pipeline (which refuses it): judging it here would tell what the record holds. A cancelled
 * record (TREC C) too: the pipeline says it must be restored first, rather than "unchanged".
 */
function changesNothing(dim: AuthorizedDimension, body: Body, stored: Row): boolean {
  if (stored.TREC === "C") return false;
  for (const [key, value] of Object.entries(body)) {
    const field = dim.fieldsByCode.get(key);
    if (!field || field.system) return false;
    if (field.isId) continue;
    if (!dim.rules.allows(field, "L") && !dim.rules.allows(field, "D")) return false;
    if (!isDeepStrictEqual(value, stored[key] ?? null)) return false;
  }
  return true;
}

/** A row's outcome: what the import did with it (the batch's result carries it). */
type Imported = "created" | "updated" | "unchanged";

/** Where a batch's writing got to: the index of the row being written (the one that failed). */
interface BatchProgress {
  at: number;
}

/**
 * Writes `rows` (prepared) in one transaction, each in its own savepoint; returns each row's
 * outcome. With mode=upsert, the records the rows' ids name are locked first (id order) and those
 * that exist are updated, as is a record an earlier row of the batch created (the same id twice
 * is a create, then an update). A create row giving an id a record holds (one that exists, or an
 * earlier row created) is 409 DUPLICATE_KEY before its other checks: what the INSERT would say,
 * and the cause to fix (a MEDIA value, say, that a create refuses, an upsert takes back as it is).
 */
function writeRows(
  deps: WriteDeps,
  ctx: RequestContext,
  model: MetadataModel,
  dim: AuthorizedDimension,
  rows: readonly Prepared[],
  opts: ImportOptions,
  progress: BatchProgress,
  after?: (outcomes: readonly BatchItemResult[]) => void,
) {
  return inWriteTransaction(deps, ctx, model, opts, async (w) => {
    const upsert = opts.mode === "upsert";
    const stored = upsert ? await lockStored(w, dim, idsOf(dim, rows)) : new Map<string, Row>();
    const given = new Set<string>();
    for (const r of rows) {
      const id = givenId(dim, r.body);
      if (id !== null && !stored.has(id)) given.add(id);
    }
    const taken = await takenIds(w, dim, [...given]);
    /** What the batch wrote: created ids taken, and the stored rows the next rows compare with. */
    const remember = (result: WriteResult, before: string | null) => {
      const id = String(result.recordId);
      if (before !== null && before !== id) {
        // A key change: the old id is free again.
        stored.delete(before);
        taken.delete(before);
      }
      taken.add(id);
      if (!upsert) return;
      stored.set(id, result.record);
      for (const c of result.cascaded)
        if (c.dim === dim.code && stored.has(String(c.recordId))) stored.set(String(c.recordId), c.record);
    };
    const outcome = await eachInSavepoint(
      w,
      rows,
      "created",
      () => null,
      async (item, index) => {
        progress.at = index;
        const { body, refused } = item as Prepared;
        if (refused) throw refused;
        const id = upsert ? parseRecordId(dim, body[dim.idField]) : null;
        const held = id === null ? undefined : stored.get(String(id));
        if (id !== null && held) {
          const patch = updateBody(dim, body, held);
          // Its stored values again (an unchanged export imported back): no write, no revision, no
          // event, where an update would move TREC N to M and stamp the audit fields for nothing.
          if (changesNothing(dim, patch, held)) return unchangedResult(dim, id, held);
          const result = await updateRecord(w, dim, id, patch, "patch");
          remember(result, String(id));
          return Object.assign(result, { imported: "updated" as const });
        }
        const key = givenId(dim, body);
        if (key !== null && taken.has(key)) throw duplicateKey(dim);
        const result = await createRecord(w, dim, createBody(body));
        remember(result, null);
        return Object.assign(result, { imported: "created" as const });
      },
    );
    after?.(outcome.results);
    return outcome.results;
  });
}

/** An unchanged row's result in its batch: the record as stored, nothing written. */
function unchangedResult(dim: DimensionDef, id: RecordId, stored: Row): WriteResult {
  const change = { dim: dim.code, action: "updated" as const, recordId: id, record: stored, eventId: "" };
  return Object.assign(
    { ...change, force: false, children: [], cascaded: [] },
    { imported: "unchanged" as const },
  );
}

function count(result: ImportResult, rows: readonly Prepared[], outcomes: readonly BatchItemResult[]) {
  for (const o of outcomes) {
    const row = rows[o.index]!.row;
    if (o.status === "failed") {
      const e = o.error!;
      listError(result, { row, field: e.field ?? null, code: e.code, message: e.message });
      continue;
    }
    const imported = (o.result as { imported?: Imported } | undefined)?.imported ?? "created";
    result[imported]++;
  }
}

/** The import's refusal of its body (a malformed row, bad bytes, too large) with what it wrote. */
function withProgress(err: ApiError, result: ImportResult, atomic: boolean): ApiError {
  const written = result.created + result.updated;
  const note =
    atomic || written === 0 ? " Nothing was written." : ` The ${written} rows written before it stay.`;
  // The reason may be a parser's, without a full stop: the note is a sentence of its own.
  const message = /[.!?]$/.test(err.message) ? err.message : `${err.message}.`;
  return new ApiError(err.status, err.code, err.errorType, `${message}${note}`, {
    ...(err.field === undefined ? {} : { field: err.field }),
    details: {
      ...err.details,
      received: result.received,
      created: atomic ? 0 : result.created,
      updated: atomic ? 0 : result.updated,
      unchanged: result.unchanged,
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
    writeTimeoutMs === undefined
      ? Number.POSITIVE_INFINITY
      : (opts.writeStartedAt ?? performance.now()) + writeTimeoutMs;
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
        unchanged: result.unchanged,
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

/** Whether `err` is the refusal of events past REQUEST_EVENTS_MAX_BYTES (change-event.ts). */
function eventsOverflow(err: unknown): err is PayloadTooLargeError {
  return err instanceof PayloadTooLargeError && err.details?.max_event_bytes !== undefined;
}

/** A row whose events alone (its record's, its cascades') pass REQUEST_EVENTS_MAX_BYTES. */
function rowEventsTooLarge(row: number, maxBytes: number): ImportRowError {
  return {
    row,
    field: null,
    code: "PAYLOAD_TOO_LARGE",
    message: `Row ${row}'s events would exceed ${maxBytes} bytes (REQUEST_EVENTS_MAX_BYTES), the most one transaction writes, even alone; it was not written.`,
  };
}

/** 413: an atomic import, one transaction, whose events pass REQUEST_EVENTS_MAX_BYTES. */
function atomicEventsTooLarge(maxBytes: number, row: number): PayloadTooLargeError {
  return new PayloadTooLargeError(
    `The events of this import's rows would exceed ${maxBytes} bytes (REQUEST_EVENTS_MAX_BYTES) by row ${row}, the most one transaction writes, and atomic=true writes every row in one transaction: import without atomic=true (batches are then cut to fit), or split the rows into several atomic imports.`,
    { max_event_bytes: maxBytes, row },
  );
}

/**
 * An estimate of the event bytes a row writes: its values as JSON, what its record's event holds
 * at least (an update's holds the whole record, and the values it changes twice). Batches are cut
 * by it beforehand; a batch whose events pass the bound all the same is cut where they did.
 */
function estimatedEventBytes(p: Prepared): number {
  return p.refused ? 0 : Buffer.byteLength(JSON.stringify(p.body) ?? "");
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
  const ignored = new Set<string>();
  const maxRecords = deps.config.maxBatchSize;
  const maxEventBytes = deps.config.requestEventsMaxBytes;
  const atomicMax = deps.config.importAtomicMaxRows;
  const stopped = writeBound(opts);
  let batch: Prepared[] = [];
  let records = 0;
  let eventBytes = 0;
  /**
   * Writes `rows` as batches: one transaction, unless its events pass REQUEST_EVENTS_MAX_BYTES
   * (rolled back whole), then the rows before the one that passed it and the rest as batches of
   * their own; a row that passes it alone is refused, listed like any refused row.
   */
  const writeBatches = async (rows: Prepared[]) => {
    const pending: Prepared[][] = [rows];
    while (pending.length) {
      const piece = pending.shift()!;
      const stop = stopped();
      if (stop) throw stop;
      const progress: BatchProgress = { at: 0 };
      try {
        count(result, piece, await writeRows(deps, ctx, model, dim, piece, opts, progress));
      } catch (err) {
        if (!eventsOverflow(err)) throw err;
        const cut = progress.at;
        if (cut === 0) listError(result, rowEventsTooLarge(piece[0]!.row, maxEventBytes));
        const rest = piece.slice(Math.max(cut, 1));
        pending.unshift(...(cut === 0 ? [] : [piece.slice(0, cut)]), ...(rest.length ? [rest] : []));
      }
    }
  };
  const flush = async () => {
    if (!batch.length) return;
    const rows = batch;
    batch = [];
    records = 0;
    eventBytes = 0;
    await writeBatches(rows);
  };
  const answer = () => {
    if (ignored.size) result.warnings = [ignoredWarning(ignored)];
    return result;
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
      const prepared = prepare(dim, input, opts.mode === "upsert", ignored);
      const weight = prepared.refused ? 1 : recordsInCreate(model, dim.code, prepared.body);
      const bytes = estimatedEventBytes(prepared);
      // A batch ends before the row that would take it past MAX_BATCH_SIZE records or, by the
      // estimate, past REQUEST_EVENTS_MAX_BYTES of events (each batch is a request's worth).
      if (!opts.atomic && (records + weight > maxRecords || eventBytes + bytes > maxEventBytes))
        await flush();
      batch.push(prepared);
      records += weight;
      eventBytes += bytes;
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
  if (!opts.atomic) return answer();
  // All or none: a refused row throws inside the transaction, which rolls every row back; so do
  // events past REQUEST_EVENTS_MAX_BYTES, the bound of the one transaction (413 with the counts).
  if (batch.length) {
    const all = batch;
    const progress: BatchProgress = { at: 0 };
    try {
      await writeRows(deps, ctx, model, dim, all, opts, progress, (outcomes) => {
        count(result, all, outcomes);
        if (result.failed > 0) throw atomicFailure(result);
      });
    } catch (err) {
      if (!eventsOverflow(err)) throw err;
      throw withProgress(atomicEventsTooLarge(maxEventBytes, all[progress.at]!.row), result, true);
    }
  }
  return answer();
}
