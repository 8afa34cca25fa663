// Row-level SQL of the write pipeline on one dimension table, always limited to the caller's
// tenant. Identifiers come from metadata (ident); values are parameters.
import { ident } from "../../db/sql.ts";
import { BadRequestError, NotFoundError, ValidationError } from "../../errors.ts";
import {
  CANONICAL_INTEGER,
  DEFAULT_STRING_LENGTH,
  storableText,
  TENANT_COLUMN,
} from "../../metadata/data-types.ts";
import type { DimensionDef, QueryOptions } from "../../types.ts";
import type { WriteContext } from "./context.ts";
import { writeScopeSql } from "./row-scope.ts";
import { mapDatabaseError } from "./db-errors.ts";
import { foreignKeyError, type KeyLookup, keyLookupSql } from "./foreign-keys.ts";
import { CounterValue } from "./templates.ts";
import { rowToRecord } from "./values.ts";
import type { GroupedCreate } from "./create-groups.ts";
import { codecOf } from "../../metadata/codecs.ts";
import { perDefinition } from "../../metadata/per-definition.ts";
import { createRevisionsSql } from "../../history/revisions.ts";
import {
  outboxInsertFromSql,
  outboxNoticeItem,
  REQUIRED_OUTBOX_COLUMNS,
  type RequiredOutboxColumn,
} from "../../events/outbox.ts";

export type RecordId = string | number;
type Row = Record<string, unknown>;

/**
 * An id from a path or body as the id field's type, or null when it cannot name a record: a
 * STRING id the column cannot hold (a NUL, an unpaired surrogate, longer than the field) names none.
 */
export function parseRecordId(dim: DimensionDef, raw: unknown): RecordId | null {
  if (dim.idType === "INTEGER") {
    if (typeof raw === "number") return Number.isSafeInteger(raw) ? raw : null;
    if (typeof raw === "string" && CANONICAL_INTEGER.test(raw)) {
      const n = Number(raw);
      return Number.isSafeInteger(n) ? n : null;
    }
    return null;
  }
  if (typeof raw === "number" && Number.isFinite(raw)) return String(raw);
  if (typeof raw !== "string" || raw === "" || !storableText(raw)) return null;
  const field = dim.fieldsByCode.get(dim.idField);
  const length = field?.dataType === "STRING" ? (field.length ?? DEFAULT_STRING_LENGTH) : null;
  return length !== null && [...raw].length > length ? null : raw;
}

/** 404 RECORD_NOT_FOUND for `id` as the request gave it (at most 60 characters of it shown). */
export function recordNotFound(dim: DimensionDef, id: unknown): NotFoundError {
  const shown = typeof id === "string" && id.length > 60 ? id.slice(0, 60) : id;
  return new NotFoundError("RECORD_NOT_FOUND", `${dim.code} ${String(shown)} does not exist.`, {
    details: { dimension: dim.code, id: shown },
  });
}

/**
 * Reads the record and locks its row until the transaction ends (SELECT … FOR UPDATE), so that
 * concurrent writers of one record queue and each sees the previous one's result.
 */
export async function lockRecord(w: WriteContext, dim: DimensionDef, rawId: unknown): Promise<Row> {
  // A body's id (a batch item's, a command's) that is no id at all is the client's mistake, not a
  // record that does not exist.
  if (typeof rawId !== "string" && typeof rawId !== "number") {
    throw new BadRequestError("INVALID_PARAMETER", `The ${dim.code} id must be a string or a number.`, {
      field: "id",
    });
  }
  const id = parseRecordId(dim, rawId);
  if (id === null) throw recordNotFound(dim, rawId);
  // Outside the caller's row scope is as absent as another tenant's record (decisions.md §17).
  const params: unknown[] = [w.ctx.principal.tenantId, id];
  const scope = writeScopeSql(w, dim, params);
  const res = await w.tx.query<Row>(
    `SELECT * FROM ${ident(dim.tableName)} AS t WHERE t.${ident(TENANT_COLUMN)} = $1 AND t.${ident(dim.idField)} = $2${scope} FOR UPDATE OF t`,
    params,
  );
  const row = res.rows[0];
  if (!row) throw recordNotFound(dim, rawId);
  return rowToRecord(dim, row);
}

/** Whether a record of the tenant has this id (an id the column cannot hold names none). */
export async function recordExists(w: WriteContext, dim: DimensionDef, rawId: unknown): Promise<boolean> {
  const id = parseRecordId(dim, rawId);
  if (id === null) return false;
  const res = await w.tx.query(
    `SELECT 1 FROM ${ident(dim.tableName)} WHERE ${ident(TENANT_COLUMN)} = $1 AND ${ident(dim.idField)} = $2`,
    [w.ctx.principal.tenantId, id],
  );
  return res.rows.length > 0;
}

/**
 * Locks the rows of `dim` named by `rawIds` (those that can name one) in id order, so that writers
 * of overlapping sets of records take their locks in one order and queue instead of deadlocking;
 * returns the ids of those that exist, as text.
 */
export async function lockRecordIds(
  w: WriteContext,
  dim: DimensionDef,
  rawIds: readonly unknown[],
): Promise<Set<string>> {
  const ids = [...new Set(rawIds.map((raw) => parseRecordId(dim, raw)).filter((id) => id !== null))];
  if (!ids.length) return new Set();
  const params: unknown[] = [w.ctx.principal.tenantId, ids];
  const scope = writeScopeSql(w, dim, params);
  const res = await w.tx.query<{ id: unknown }>(
    `SELECT t.${ident(dim.idField)} AS "id" FROM ${ident(dim.tableName)} AS t WHERE t.${ident(TENANT_COLUMN)} = $1 AND t.${ident(dim.idField)} = ANY($2)${scope}
      ORDER BY t.${ident(dim.idField)} FOR UPDATE OF t`,
    params,
  );
  return new Set(res.rows.map((r) => String(r.id)));
}

/** Locks the records of `dim` whose `field` equals `value` (cascades), in id order. */
export async function lockRecordsWhere(
  w: WriteContext,
  dim: DimensionDef,
  field: string,
  value: unknown,
): Promise<Row[]> {
  const type = dim.fieldsByCode.get(field)?.dataType;
  if (type === "INTEGER" && !(typeof value === "number" && Number.isSafeInteger(value))) return [];
  // A cascade touches only the children within the caller's scope (src/resolvers/write/row-scope.ts);
  // children outside it that it would leave behind refuse the write first (naming-records.ts).
  const params: unknown[] = [w.ctx.principal.tenantId, type === "INTEGER" ? value : String(value)];
  const scope = writeScopeSql(w, dim, params);
  const res = await w.tx.query<Row>(
    `SELECT * FROM ${ident(dim.tableName)} AS t WHERE t.${ident(TENANT_COLUMN)} = $1 AND t.${ident(field)} = $2${scope}
      ORDER BY t.${ident(dim.idField)} FOR UPDATE OF t`,
    params,
  );
  return res.rows.map((r) => rowToRecord(dim, r));
}

/**
 * A statement's values as parameters ($1, $2, … in the order added to `params`), and its foreign
 * keys set by their look-up (keyLookupSql) in place of the value.
 */
function statementValues(w: WriteContext, lookups: readonly KeyLookup[], params: unknown[] = []) {
  const param = (v: unknown) => {
    params.push(v);
    return `$${params.length}`;
  };
  const byColumn = new Map(lookups.map((l) => [l.field.code, l]));
  return {
    params,
    param,
    /** The SQL of column `c`'s value: its look-up for a foreign key, else a parameter. */
    value: (c: string, v: unknown) => {
      const lookup = byColumn.get(c);
      return lookup ? keyLookupSql(w, lookup, params) : param(v);
    },
    /** A NOT NULL key column given NULL by its look-up: the key names no record (400). */
    keyError(err: unknown) {
      const { code, column } = err as { code?: string; column?: string };
      const lookup = code === "23502" && column ? byColumn.get(column) : undefined;
      return lookup ? foreignKeyError(lookup) : null;
    },
  };
}

/** A nullable key column left NULL by its look-up: the key names no record (400). */
function checkLookedUp(row: Row, lookups: readonly KeyLookup[]): void {
  for (const lookup of lookups) {
    if (row[lookup.field.code] === null || row[lookup.field.code] === undefined)
      throw foreignKeyError(lookup);
  }
}

/**
 * The parts of a create's INSERT: its template counters (one CTE each: the counter row stays
 * locked until COMMIT, from here on only; the value its text around the number), the INSERT
 * without RETURNING (and apart: its `into` and its VALUES `row`), its parameters (appended to
 * `paramsSoFar`), and how a failure of it maps to an API error. Its text depends only on what
 * createShape names (a create group's key): what else it comes to depend on goes there too.
 */
function insertStatement(
  w: WriteContext,
  dim: DimensionDef,
  columns: Array<[string, unknown]>,
  lookups: readonly KeyLookup[],
  paramsSoFar: unknown[] = [],
) {
  const all: Array<[string, unknown]> = [...columns, [TENANT_COLUMN, w.ctx.principal.tenantId]];
  const { params, param, value, keyError } = statementValues(w, lookups, paramsSoFar);
  const counters: string[] = [];
  const counterColumns: string[] = [];
  const values = all.map(([c, v]) => {
    if (!(v instanceof CounterValue)) return value(c, v);
    const cte = `c${counters.length}`;
    counters.push(
      `${cte} AS (INSERT INTO "TB_SEQUENCE" ("TENANT_ID", "SEQ_NAME", "VALUE") VALUES (${param(w.ctx.principal.tenantId)}, ${param(v.name)}, 1)
       ON CONFLICT ("TENANT_ID", "SEQ_NAME") DO UPDATE SET "VALUE" = "TB_SEQUENCE"."VALUE" + 1 RETURNING "VALUE"::text AS n)`,
    );
    counterColumns.push(c);
    // As String(n).padStart(width, "0"): padded to the width, never cut.
    const digits = v.width
      ? `CASE WHEN length(n) >= ${v.width} THEN n ELSE lpad(n, ${v.width}, '0') END`
      : "n";
    return `(SELECT CAST(${param(v.prefix)} AS text) || ${digits} || CAST(${param(v.suffix)} AS text) FROM ${cte})`;
  });
  const into = `INSERT INTO ${ident(dim.tableName)} (${all.map(([c]) => ident(c)).join(", ")})`;
  const row = `(${values.join(", ")})`;
  const insert = `${into}\n    VALUES ${row}`;
  /** The API error of a failed INSERT (rethrows what it does not know). */
  const failed = (err: unknown): never => {
    const missing = keyError(err);
    if (missing) throw missing;
    const counted = counterColumns.length === 1 ? dim.fieldsByCode.get(counterColumns[0]!) : undefined;
    if ((err as { code?: string }).code === "22001" && counted) {
      const max = counted.length ?? DEFAULT_STRING_LENGTH;
      throw new ValidationError(
        "INVALID_FIELD_VALUE",
        `${counted.code}: its template's counter has grown past ${max} characters; give ${counted.code} ` +
          "in the request, or have an administrator lengthen the field (TB_VAR.LENGTH) or shorten the template",
        { field: counted.code },
      );
    }
    return mapDatabaseError(err, dim);
  };
  return { counters, insert, into, row, params, param, failed };
}

/**
 * Inserts one row. The foreign keys in `lookups` are looked up in the same statement: each such
 * column receives the key only when it names a live record (else NULL), so a key that names none
 * is refused (400 INVALID_FOREIGN_KEY) from the row, and the caller's transaction rolls it back.
 */
export async function insertRow(
  w: WriteContext,
  dim: DimensionDef,
  columns: Array<[string, unknown]>,
  lookups: readonly KeyLookup[] = [],
): Promise<Row> {
  const { counters, insert, params, failed } = insertStatement(w, dim, columns, lookups);
  const sql = `${counters.length ? `WITH ${counters.join(",\n")}\n` : ""}${insert} RETURNING *`;
  let row: Row;
  try {
    row = (await w.tx.query<Row>(sql, params)).rows[0]!;
  } catch (err) {
    return failed(err);
  }
  checkLookedUp(row, lookups);
  return rowToRecord(dim, row);
}

/** Whether insertRowWithEvent can refuse each of these keys from within its one statement. */
export function keysCheckedInStatement(lookups: readonly KeyLookup[]): boolean {
  return lookups.filter((l) => l.field.nullable).length <= REQUIRED_OUTBOX_COLUMNS.length;
}

/** The column under which insertRowWithEvent's statement answers the event's OUTBOX_ID. */
const EVENT_ID_COLUMN = "$OUTBOX_ID";

/**
 * Over the inserted row `ins`: the event payload's SQL (the record's JSON, field by field by its
 * codec) and the fields the statement answers. Once per dimension of a metadata version.
 */
const eventSql = perDefinition((dim): { payload: string; returned: string } => {
  const pairs = dim.fields.map(
    (f) => `'${f.code.replaceAll("'", "''")}', ${codecOf(f.dataType).eventJson(`ins.${ident(f.code)}`)}`,
  );
  // jsonb_build_object takes at most 100 arguments: 50 fields a call.
  const parts: string[] = [];
  for (let i = 0; i < pairs.length; i += 50)
    parts.push(`jsonb_build_object(${pairs.slice(i, i + 50).join(", ")})`);
  return { payload: parts.join(" || "), returned: dim.fields.map((f) => `ins.${ident(f.code)}`).join(", ") };
});

/**
 * The Created event of the rows a create's INSERT wrote, as the INSERT of their outbox rows reading
 * them as `ins` (parameters through `param`), the record id's SQL over `ins`, the fields answered,
 * and how a failure of the statement maps to an API error: the i-th nullable key looked up nulls
 * the i-th of the event's NOT NULL columns (REQUIRED_OUTBOX_COLUMNS) when the look-up found
 * nothing, so the column a NOT NULL failure names tells the key (insertRowWithEvent). Like
 * insertStatement's, its text depends only on what createShape names.
 */
function createdEventSql(
  w: WriteContext,
  dim: DimensionDef,
  lookups: readonly KeyLookup[],
  param: (v: unknown) => string,
) {
  const keyOfColumn = new Map<string, KeyLookup>();
  const nulledWhen: Partial<Record<RequiredOutboxColumn, string>> = {};
  let nullable = 0;
  for (const lookup of lookups) {
    if (!lookup.field.nullable) continue;
    const column = REQUIRED_OUTBOX_COLUMNS[nullable++]!;
    keyOfColumn.set(column, lookup);
    nulledWhen[column] = `ins.${ident(lookup.field.code)} IS NULL`;
  }
  const { payload, returned } = eventSql(dim);
  const aggregateId = `ins.${ident(dim.idField)}::text`;
  const event = outboxInsertFromSql(
    { dim: dim.code, kind: "Created", tenantId: w.ctx.principal.tenantId, createdAt: w.now },
    "ins",
    aggregateId,
    payload,
    param,
    nulledWhen,
  );
  /** A NOT NULL failure of the event row: the key whose look-up found nothing. */
  const keyError = (err: unknown) => {
    const { code, table, column } = err as { code?: string; table?: string; column?: string };
    return code === "23502" && table === "TB_ANAG_OUTBOX00" && column ? keyOfColumn.get(column) : undefined;
  };
  // The records' create revisions, read from the event rows (TB_DIM.HISTORY; src/history/).
  const history = dim.history ? createRevisionsSql(dim, w.ctx.principal.tenantId, w.now, "ev", param) : null;
  return { event, aggregateId, returned, keyError, history };
}

/**
 * How a create's statement runs: prepared per metadata version (as reads are), with a generic plan
 * (src/db/connection.ts): an INSERT … VALUES plans the same whatever its values, and its key
 * look-ups are by key, so it is planned once per connection instead of at every execution.
 */
const createStatementOptions = (w: WriteContext): QueryOptions => ({
  prepare: w.model.version,
  plan: "generic",
});

/** A create's row and Created event as the database answered them (insertRowWithEvent). */
interface WrittenRow {
  record: Row;
  eventId: string;
}

/** The column under which a group's statement answers which create a row is (createdRows). */
const ROW_COLUMN = "$ROW";

/**
 * Inserts one row and its Created event in one statement (the row's INSERT a CTE whose row the
 * event's INSERT reads: data-modifying CTEs): the transaction's last statement (lastStatement),
 * so a create that sent nothing before is one statement outside BEGIN and COMMIT. The payload
 * is built in SQL from the inserted row, field by field by its codec (eventJson): the record as
 * insertRow and recordChanged would have written it. A foreign key the look-up left NULL is
 * refused by the statement itself: a NOT NULL column by its constraint, a nullable one
 * (keysCheckedInStatement) by the event row: the i-th nullable key looked up nulls the i-th of its
 * NOT NULL columns (REQUIRED_OUTBOX_COLUMNS) when the look-up found nothing, and the column the
 * failure names tells the key (the first in the look-ups' order when several fail, as
 * checkLookedUp reports on the general path). Answers the record and the event's id.
 *
 * With `w.creates` (PostgreSQL), a create without template counters goes through the group
 * commit (create-groups.ts): creates of its tenant and statement shape that arrive while one is
 * being written are written next, together (createdRows).
 */
export async function insertRowWithEvent(
  w: WriteContext,
  dim: DimensionDef,
  columns: Array<[string, unknown]>,
  lookups: readonly KeyLookup[],
  channel: string,
): Promise<WrittenRow> {
  const notice = { channel, item: outboxNoticeItem(w.ctx.principal.tenantId, dim.code) };
  // This create's own statement, built when it is sent alone or to map its failure: in a group,
  // the group's statement builds each create's row instead (createdRows).
  let own: { row: ReturnType<typeof insertStatement>; event: ReturnType<typeof createdEventSql> } | null =
    null;
  const ownStatement = () => {
    if (!own) {
      const row = insertStatement(w, dim, columns, lookups);
      own = { row, event: createdEventSql(w, dim, lookups, row.param) };
    }
    return own;
  };
  const alone = async (): Promise<WrittenRow> => {
    const { row: insert, event } = ownStatement();
    const statement = (payload: string | null) =>
      `WITH ${[
        ...insert.counters,
        `ins AS (${insert.insert} RETURNING *)`,
        `ev AS (${event.event})`,
        ...(event.history ? [`hist AS (${event.history})`] : []),
      ].join(",\n")}
    SELECT ${event.returned}, ev."OUTBOX_ID" AS "${EVENT_ID_COLUMN}"${payload ? `, pg_notify('${channel}', ${payload})` : ""} FROM ins, ev`;
    const row = (await w.tx.lastStatement!<Row>(notice, statement, insert.params, createStatementOptions(w)))
      .rows[0]!;
    return { record: rowToRecord(dim, row), eventId: String(row[EVENT_ID_COLUMN]) };
  };
  try {
    if (!w.creates || columns.some(([, v]) => v instanceof CounterValue) || lookups.some((l) => l.scope))
      return await alone();
    const create: GroupedRow = {
      alone,
      row: (paramsSoFar) => insertStatement(w, dim, columns, lookups, paramsSoFar),
      event: (param) => createdEventSql(w, dim, lookups, param),
      together: (items) => createdRows(w, dim, notice, channel, items),
    };
    const written = await w.creates.write(createShape(w, dim, columns, lookups), create);
    // Written by another create's statement, its own transaction still tells this process's
    // listeners (the relay, the totals cache) once it ends, before the create is answered.
    w.tx.notifyAfterCommit?.(notice.channel, notice.item);
    return written;
  } catch (err) {
    const { row, event } = ownStatement();
    const key = event.keyError(err);
    if (key) throw foreignKeyError(key);
    return row.failed(err);
  }
}

/**
 * What makes two creates' statements one shape (create-groups.ts), without their text: the
 * tenant (the event row's), the metadata version (the dimension's definition: its table, its
 * event's payload SQL), the columns in order, and each key look-up's column, key, table and
 * nullability. The INSERT's and the event's text are a function of these (insertStatement,
 * createdEventSql, keyLookupSql: every value is a parameter, numbered in this order), so two
 * creates of one shape have one statement text, and a group's rows line up with its first's
 * column list.
 */
function createShape(
  w: WriteContext,
  dim: DimensionDef,
  columns: ReadonlyArray<[string, unknown]>,
  lookups: readonly KeyLookup[],
): string {
  let shape = `${w.ctx.principal.tenantId}\u0000${w.model.version}\u0000${dim.code}\u0000`;
  for (const [column] of columns) shape += `${column}\u0001`;
  for (const l of lookups)
    shape += `\u0000${l.field.code}\u0001${l.key}\u0001${l.target.tableName}\u0001${l.field.nullable}`;
  return shape;
}

/** A create in a group commit: its own statement, or its row in its group's statement. */
interface GroupedRow extends GroupedCreate<WrittenRow> {
  /** Its INSERT's parts, its parameters appended to `paramsSoFar`. */
  row(paramsSoFar: unknown[]): ReturnType<typeof insertStatement>;
  /** The INSERT of the group's events, with this create's event parameters. */
  event(param: (v: unknown) => string): ReturnType<typeof createdEventSql>;
}

/**
 * The rows and events of a group of creates of one tenant and shape in one statement, sent on the
 * first's transaction: one INSERT of every row (VALUES in the group's order), one INSERT of their
 * events with the first create's event parameters (its type, tenant and time: the group commits
 * as one), and the answer's rows numbered in RETURNING's order, which is the VALUES' order
 * (PostgreSQL inserts and returns the rows of a VALUES list one by one, in order; Django's
 * bulk_create relies on it too), each event joined to its row by the record's id (unique in the
 * tenant's table). test/write/create-groups.test.ts checks that each create gets its own row.
 */
async function createdRows(
  w: WriteContext,
  dim: DimensionDef,
  notice: { channel: string; item: string },
  channel: string,
  items: readonly GroupedRow[],
): Promise<WrittenRow[]> {
  // Every row's parameters go to `params` in turn, then the events' (any row's `param` adds there).
  const params: unknown[] = [];
  const parts = items.map((item) => item.row(params));
  const { into, param } = parts[0]!;
  const rows = parts.map((p) => p.row);
  const { event, aggregateId, returned, history } = items[0]!.event(param);
  const statement = (payload: string | null) =>
    `WITH ins AS (${into}\n    VALUES ${rows.join(",\n      ")} RETURNING *),
    ev AS (${event}),${history ? `\n    hist AS (${history}),` : ""}
    n AS (SELECT row_number() OVER () AS "${ROW_COLUMN}", ins.* FROM ins)
    SELECT ins."${ROW_COLUMN}", ${returned}, ev."OUTBOX_ID" AS "${EVENT_ID_COLUMN}"${payload ? `, pg_notify('${channel}', ${payload})` : ""}
      FROM n AS ins JOIN ev ON ev."AGGREGATE_ID" = ${aggregateId}`;
  const answer = await w.tx.lastStatement!<Row>(notice, statement, params, createStatementOptions(w));
  if (answer.rows.length !== items.length)
    throw new Error(`A group of ${items.length} creates was answered with ${answer.rows.length} rows.`);
  const written: WrittenRow[] = new Array(items.length);
  for (const row of answer.rows) {
    written[Number(row[ROW_COLUMN]) - 1] = {
      record: rowToRecord(dim, row),
      eventId: String(row[EVENT_ID_COLUMN]),
    };
  }
  return written;
}

/**
 * Updates one record. A foreign key among the assignments (`lookups`) is set by its look-up
 * (keyLookupSql): NULL when it names no live record, and the change is then refused with 400
 * INVALID_FOREIGN_KEY (the caller's transaction rolls back).
 */
export async function updateRow(
  w: WriteContext,
  dim: DimensionDef,
  id: RecordId,
  assignments: Array<[string, unknown]>,
  lookups: readonly KeyLookup[] = [],
): Promise<Row> {
  const { params, value, keyError } = statementValues(w, lookups, [w.ctx.principal.tenantId, id]);
  const sets = assignments.map(([c, v]) => `${ident(c)} = ${value(c, v)}`).join(", ");
  const sql = `UPDATE ${ident(dim.tableName)} SET ${sets}
    WHERE ${ident(TENANT_COLUMN)} = $1 AND ${ident(dim.idField)} = $2 RETURNING *`;
  let row: Row | undefined;
  try {
    row = (await w.tx.query<Row>(sql, params)).rows[0];
  } catch (err) {
    const missing = keyError(err);
    if (missing) throw missing;
    return mapDatabaseError(err, dim);
  }
  if (!row) throw recordNotFound(dim, id);
  checkLookedUp(row, lookups);
  return rowToRecord(dim, row);
}

export async function deleteRow(w: WriteContext, dim: DimensionDef, id: RecordId): Promise<void> {
  await w.tx.query(
    `DELETE FROM ${ident(dim.tableName)} WHERE ${ident(TENANT_COLUMN)} = $1 AND ${ident(dim.idField)} = $2`,
    [w.ctx.principal.tenantId, id],
  );
}
