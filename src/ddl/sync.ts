// Creates and alters dimension tables to match the metadata (decisions.md §3). Changes that
// would lose data (dropping or narrowing a column that holds values) are refused, not applied.
import { codecOf } from "../metadata/codecs.ts";
import { createHash } from "node:crypto";
import { ident } from "../db/sql.ts";
import { UnsafeSchemaChangeError } from "../errors.ts";
import { TENANT_COLUMN } from "../metadata/data-types.ts";
import type { DimensionDef, FieldDef, Problem, Queryable } from "../types.ts";

const DDL_LOCK_KEY = 724_461_002;

export interface ColumnSpec {
  name: string;
  /** SQL type as written in DDL. */
  sqlType: string;
  /** Normalised for comparison with information_schema. */
  family: "varchar" | "text" | "bigint" | "numeric" | "boolean" | "jsonb";
  length: number | null;
  precision: number | null;
  scale: number | null;
  nullable: boolean;
  identity: boolean;
}

export interface ExistingColumn {
  name: string;
  family: string;
  length: number | null;
  precision: number | null;
  scale: number | null;
  nullable: boolean;
  /** GENERATED ... AS IDENTITY (an INTEGER id); absent means no. */
  identity?: boolean;
}

export interface TablePlan {
  table: string;
  statements: string[];
  /**
   * After `statements`: the CREATE INDEX of each index the table lacks (preceded by the DROP INDEX
   * of an invalid one under its name), then the DROP INDEX of each index one of those replaces and
   * of each composite index no longer declared. With `deferIndexes` they wait for after the caller's
   * commit.
   */
  indexBuilds: IndexBuild[];
  problems: Problem[];
}

/** An index a sync builds on an existing table, or drops once its successor is built. */
export type IndexBuild =
  | { kind: "create"; name: string; table: string; columns: readonly string[] }
  | { kind: "drop"; name: string };

/**
 * The statement of an index build: in the sync's transaction, or, deferred until after its commit
 * on PostgreSQL, CONCURRENTLY (a live table is not locked against writes meanwhile).
 */
export function indexBuildSql(build: IndexBuild, opts: { concurrently: boolean }): string {
  const how = opts.concurrently ? "CONCURRENTLY " : "";
  return build.kind === "create"
    ? `CREATE INDEX ${how}IF NOT EXISTS ${ident(build.name)} ON ${ident(build.table)} (${build.columns.map(ident).join(", ")})`
    : `DROP INDEX ${how}IF EXISTS ${ident(build.name)}`;
}

export function columnSpec(field: FieldDef, dim: DimensionDef): ColumnSpec {
  return { name: field.code, nullable: field.nullable, ...codecOf(field.dataType).column(field, dim) };
}

/** Every column of the dimension table: TB_VAR fields, audit fields, hidden TENANT_ID. */
export function tableColumns(dim: DimensionDef): ColumnSpec[] {
  const cols = dim.fields.map((f) => columnSpec(f, dim));
  cols.push({
    name: TENANT_COLUMN,
    sqlType: "VARCHAR(50)",
    family: "varchar",
    length: 50,
    precision: null,
    scale: null,
    nullable: false,
    identity: false,
  });
  return cols;
}

function columnDdl(c: ColumnSpec): string {
  const trec = c.name === "TREC" ? " DEFAULT 'N'" : "";
  return `${ident(c.name)} ${c.sqlType}${trec}${c.nullable ? "" : " NOT NULL"}`;
}

export function indexName(table: string, suffix: string): string {
  const name = `${table}_${suffix}_idx`;
  if (name.length <= 63) return name;
  const hash = createHash("sha1").update(name).digest("hex").slice(0, 8);
  return `${table.slice(0, 40)}_${hash}_idx`;
}

/**
 * Indexes besides the primary key (TENANT_ID, id), which also serves lookups by TENANT_ID: one
 * per foreign key and per INDEXED field (TB_VAR.INDEXED, decisions.md §2), on (TENANT_ID, field,
 * id). The id closes each index so that it also yields the stable order a list sorted by the field
 * asks (`ORDER BY field, id`: docs/decisions.md, "Field indexes end with the id"), without a sort.
 */
export function tableIndexes(dim: DimensionDef): Array<{ name: string; columns: string[] }> {
  const fkFields = new Set(dim.relations.map((r) => r.fromField));
  for (const f of dim.fields) if (f.fkKind || (f.indexed && !f.isId)) fkFields.add(f.code);
  fkFields.delete(dim.idField);
  return [...fkFields].sort().map((f) => ({
    name: fieldIndexName(dim.tableName, f, dim.idField),
    columns: [TENANT_COLUMN, f, dim.idField],
  }));
}

function shortHash(text: string, length: number): string {
  return createHash("sha1").update(text).digest("hex").slice(0, length);
}

/**
 * The start of every composite index name of `table` (TB_DIM.INDEXES): `<table>__cx_`, a long
 * table's name cut and hashed. No field index name starts so (codes start with a letter), so the
 * sync recognises the composite indexes it made by this prefix.
 */
export function compositeIndexPrefix(table: string): string {
  const base = table.length <= 40 ? table : `${table.slice(0, 31)}_${shortHash(table, 8)}`;
  return `${base}__cx_`;
}

/**
 * The name of a composite index on (TENANT_ID, …`fields`, id): the prefix, the fields and the id
 * (cut to fit 63 bytes), and a hash of the exact column list, so that two lists never share a name
 * (`A_B,C` and `A,B_C` read alike).
 */
export function compositeIndexName(table: string, fields: readonly string[], idField: string): string {
  const columns = [...fields, idField];
  const prefix = compositeIndexPrefix(table);
  const room = 63 - prefix.length - "_12345678_idx".length;
  return `${prefix}${columns.join("_").slice(0, room)}_${shortHash(columns.join(","), 8)}_idx`;
}

/** The composite indexes TB_DIM.INDEXES declares: (TENANT_ID, fields…, id) each. */
export function declaredIndexes(dim: DimensionDef): Array<{ name: string; columns: string[] }> {
  const byName = new Map<string, { name: string; columns: string[] }>();
  for (const fields of dim.compositeIndexes) {
    const name = compositeIndexName(dim.tableName, fields, dim.idField);
    byName.set(name, { name, columns: [TENANT_COLUMN, ...fields, dim.idField] });
  }
  return [...byName.values()];
}

/** The name of the sync's index on a field: `<table>_<field>_<id>_idx` (shortened like all names). */
export function fieldIndexName(table: string, field: string, idField: string): string {
  return indexName(table, `${field}_${idField}`);
}

/**
 * The names the sync gives or gave a field's index, in the same order for any table:
 * `<table>_<field>_idx` (the earlier form, on (TENANT_ID, field)), then the current form with
 * `idField` (when given: the id field the table has, or had before a change of key).
 */
function fieldIndexNames(table: string, field: string, idField: string | undefined): string[] {
  const names = [indexName(table, field)];
  if (idField) names.push(fieldIndexName(table, field, idField));
  return names;
}

export function createTableSql(dim: DimensionDef): string[] {
  const cols = tableColumns(dim).map(columnDdl);
  const pk = `CONSTRAINT ${ident(primaryKeyName(dim.tableName))} PRIMARY KEY (${ident(TENANT_COLUMN)}, ${ident(dim.idField)})`;
  return [
    `CREATE TABLE ${ident(dim.tableName)} (\n  ${[...cols, pk].join(",\n  ")}\n)`,
    ...[...tableIndexes(dim), ...declaredIndexes(dim)].map((ix) =>
      indexBuildSql(
        { kind: "create", name: ix.name, table: dim.tableName, columns: ix.columns },
        { concurrently: false },
      ),
    ),
  ];
}

/** The primary key constraint of a dimension table: `<table>_pk` (shortened like index names). */
export function primaryKeyName(table: string): string {
  return indexName(table, "pk").replace(/_idx$/, "");
}

export interface ExistingPrimaryKey {
  name: string;
  columns: string[];
}

export interface AlterOptions {
  /** The dimension as the metadata described it before this change: declared types are compared. */
  previous?: DimensionDef;
  /** The table's primary key as it is (null: none); left out, the key is not compared. */
  primaryKey?: ExistingPrimaryKey | null;
  /**
   * Indexes of the table that are not valid (a CREATE INDEX CONCURRENTLY that failed and was not
   * cleaned up): one the metadata wants is dropped and built again.
   */
  invalidIndexes?: ReadonlySet<string>;
}

export interface TableData {
  holdsValues(column: string): Promise<boolean>;
  maxLength(column: string): Promise<number>;
  hasNulls(column: string): Promise<boolean>;
  rowCount(): Promise<number>;
}

function sameColumns(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((c, i) => c === b[i]);
}

/** DATA_TYPE changes (normalised) of fields the previous metadata already had. */
function declaredTypeChanges(dim: DimensionDef, previous: DimensionDef | undefined): Map<string, string> {
  const changes = new Map<string, string>();
  if (!previous) return changes;
  for (const f of dim.fields) {
    const before = previous.fieldsByCode.get(f.code);
    if (before && !f.system && before.dataType !== f.dataType) {
      changes.set(f.code, `${before.dataType} to ${f.dataType}`);
    }
  }
  return changes;
}

/**
 * Compares what the table has with what the metadata wants. `data` asks the table's rows.
 * Statements run in order: dropping a primary key that moves, column changes, then the new key.
 */
export async function planAlter(
  dim: DimensionDef,
  existing: ExistingColumn[],
  existingIndexes: ReadonlySet<string>,
  data: TableData,
  opts: AlterOptions = {},
): Promise<TablePlan> {
  const table = ident(dim.tableName);
  const statements: string[] = [];
  const after: string[] = [];
  const problems: Problem[] = [];
  const refuse = (column: string, message: string) =>
    problems.push({ path: `${dim.code}.${column}`, message });
  const wanted = tableColumns(dim);
  const have = new Map(existing.map((c) => [c.name, c]));
  const typeChanges = declaredTypeChanges(dim, opts.previous);

  const wantPk = [TENANT_COLUMN, dim.idField];
  if (opts.primaryKey !== undefined && !sameColumns(opts.primaryKey?.columns ?? [], wantPk)) {
    if ((await data.rowCount()) > 0) {
      refuse(
        dim.idField,
        `changing the id field of a table that holds rows (${dim.tableName}) is refused: its key is (${(opts.primaryKey?.columns ?? []).join(", ")})`,
      );
    } else {
      if (opts.primaryKey)
        statements.push(`ALTER TABLE ${table} DROP CONSTRAINT ${ident(opts.primaryKey.name)}`);
      after.push(
        `ALTER TABLE ${table} ADD CONSTRAINT ${ident(primaryKeyName(dim.tableName))} PRIMARY KEY (${wantPk.map(ident).join(", ")})`,
      );
    }
  }

  for (const want of wanted) {
    const cur = have.get(want.name);
    const col = ident(want.name);
    if (!cur) {
      if (!want.nullable && (await data.rowCount()) > 0 && want.name !== "TREC") {
        refuse(
          want.name,
          `cannot add NOT NULL column ${want.name} to ${dim.tableName}, which holds rows: declare it NULLABLE`,
        );
        continue;
      }
      statements.push(`ALTER TABLE ${table} ADD COLUMN ${columnDdl(want)}`);
      continue;
    }
    const hasIdentity = cur.identity === true;
    if (hasIdentity && !want.identity) {
      // Before any type change: an identity column must stay an integer.
      statements.push(`ALTER TABLE ${table} ALTER COLUMN ${col} DROP IDENTITY IF EXISTS`);
    }
    const sameFamily = cur.family === want.family;
    const typeChange = typeChanges.get(want.name);
    // STRING and TEXT hold the same values (a DATE or TIMESTAMP, also VARCHAR, means something else).
    const textual =
      typeChange === undefined || typeChange === "STRING to TEXT" || typeChange === "TEXT to STRING";
    if (textual && cur.family === "varchar" && want.family === "text") {
      // A widening: every value a VARCHAR holds is a TEXT value as it is (STRING to TEXT).
      statements.push(`ALTER TABLE ${table} ALTER COLUMN ${col} TYPE ${want.sqlType}`);
    } else if (textual && cur.family === "text" && want.family === "varchar") {
      // A narrowing like a STRING's: refused only when a value would not fit (TEXT to STRING).
      const longest = want.length === null ? 0 : await data.maxLength(want.name);
      if (want.length !== null && longest > want.length) {
        refuse(
          want.name,
          `narrowing ${want.name} to ${want.length} characters would cut values of up to ${longest}`,
        );
        continue;
      }
      statements.push(`ALTER TABLE ${table} ALTER COLUMN ${col} TYPE ${want.sqlType}`);
    } else if (!sameFamily) {
      if (await data.holdsValues(want.name)) {
        refuse(
          want.name,
          `changing ${want.name} from ${cur.family} to ${want.family} would lose the values it holds`,
        );
        continue;
      }
      statements.push(
        `ALTER TABLE ${table} ALTER COLUMN ${col} TYPE ${want.sqlType.replace(/ GENERATED.*/, "")} USING NULL`,
      );
    } else if (typeChange && (await data.holdsValues(want.name))) {
      refuse(
        want.name,
        `changing the type of ${want.name} from ${typeChange} would reinterpret the values it holds`,
      );
      continue;
    } else if (want.family === "varchar" && cur.length !== want.length) {
      if (cur.length !== null && want.length !== null && want.length < cur.length) {
        const longest = await data.maxLength(want.name);
        if (longest > want.length) {
          refuse(
            want.name,
            `narrowing ${want.name} to ${want.length} characters would cut values of up to ${longest}`,
          );
          continue;
        }
      }
      statements.push(`ALTER TABLE ${table} ALTER COLUMN ${col} TYPE ${want.sqlType}`);
    } else if (want.family === "numeric" && (cur.precision !== want.precision || cur.scale !== want.scale)) {
      const narrower =
        (cur.precision ?? 0) - (cur.scale ?? 0) > (want.precision ?? 0) - (want.scale ?? 0) ||
        (cur.scale ?? 0) > (want.scale ?? 0);
      if (narrower && (await data.holdsValues(want.name))) {
        refuse(
          want.name,
          `narrowing ${want.name} to NUMERIC(${want.precision}, ${want.scale}) could change the values it holds`,
        );
        continue;
      }
      statements.push(`ALTER TABLE ${table} ALTER COLUMN ${col} TYPE ${want.sqlType}`);
    }
    if (cur.nullable && !want.nullable) {
      if (await data.hasNulls(want.name)) {
        refuse(want.name, `${want.name} cannot become NOT NULL: some rows hold no value`);
        continue;
      }
      statements.push(`ALTER TABLE ${table} ALTER COLUMN ${col} SET NOT NULL`);
    } else if (!cur.nullable && want.nullable) {
      statements.push(`ALTER TABLE ${table} ALTER COLUMN ${col} DROP NOT NULL`);
    }
    if (want.identity && !hasIdentity) {
      // The id became a generated INTEGER (NOT NULL first): numbering continues after the highest id.
      statements.push(
        `ALTER TABLE ${table} ALTER COLUMN ${col} ADD GENERATED BY DEFAULT AS IDENTITY`,
        `SELECT setval(pg_get_serial_sequence('${table}', '${want.name}'), (SELECT COALESCE(max(${col}), 0) + 1 FROM ${table}), false)`,
      );
    }
  }
  const wantedNames = new Set(wanted.map((c) => c.name));
  for (const cur of existing) {
    if (wantedNames.has(cur.name)) continue;
    if (await data.holdsValues(cur.name)) {
      const scopeKey = opts.previous?.rowScope.find((k) => k.key !== "owner" && k.column === cur.name);
      if (scopeKey) problems.push(unscopeProblem(dim, scopeKey.key, cur.name));
      else refuse(cur.name, `dropping ${cur.name} from ${dim.tableName} would lose the values it holds`);
      continue;
    }
    statements.push(`ALTER TABLE ${table} DROP COLUMN ${ident(cur.name)}`);
  }
  statements.push(...after);
  const wantedIndexes = tableIndexes(dim);
  const wantedIndexNames = new Set(wantedIndexes.map((ix) => ix.name));
  const wantedOn = new Set(wantedIndexes.map((ix) => ix.columns[1]));
  // An index the sync made for a field that no longer wants one (INDEXED cleared) goes at once;
  // one of an earlier form (before the id closed it, or closed by an earlier key) goes once its
  // successor is built. Indexes made by hand under other names are left alone.
  const superseded: IndexBuild[] = [];
  for (const f of dim.fields) {
    if (!wantedNames.has(f.code)) continue;
    const names = [
      ...fieldIndexNames(dim.tableName, f.code, opts.previous?.idField),
      fieldIndexName(dim.tableName, f.code, dim.idField),
    ];
    for (const name of new Set(names)) {
      if (!existingIndexes.has(name) || wantedIndexNames.has(name)) continue;
      const drop: IndexBuild = { kind: "drop", name };
      if (wantedOn.has(f.code)) superseded.push(drop);
      else statements.push(indexBuildSql(drop, { concurrently: false }));
    }
  }
  const indexBuilds: IndexBuild[] = [];
  const declared = declaredIndexes(dim);
  const invalid = opts.invalidIndexes ?? new Set<string>();
  for (const ix of [...wantedIndexes, ...declared]) {
    if (existingIndexes.has(ix.name) && !invalid.has(ix.name)) continue;
    if (invalid.has(ix.name)) indexBuilds.push({ kind: "drop", name: ix.name });
    indexBuilds.push({ kind: "create", name: ix.name, table: dim.tableName, columns: ix.columns });
  }
  indexBuilds.push(...superseded);
  indexBuilds.push(...undeclaredIndexDrops(dim, existingIndexes, opts.previous));
  return { table: dim.tableName, statements, indexBuilds, problems };
}

/**
 * Removing a key from TB_DIM.ROW_SCOPE drops its system column (decisions.md §17); while the column
 * holds the rows' units or environments the sync refuses, and says why and what to do.
 */
function unscopeProblem(dim: DimensionDef, key: string, column: string): Problem {
  return {
    path: `${dim.code}.ROW_SCOPE`,
    message: `removing ${key} from the ROW_SCOPE of ${dim.code} drops the system column ${column} of ${dim.tableName}, which holds the ${key} of its rows, and the sync never drops data. To unscope ${dim.code}, first clear the column deliberately (UPDATE ${ident(dim.tableName)} SET ${ident(column)} = NULL), then remove ${key} from ROW_SCOPE; to let callers see every row instead, keep ROW_SCOPE and give them a grant with all_rows.`,
  };
}

/**
 * The composite indexes the sync made on the table (by their prefix, under the table's name or its
 * name before a rename) that TB_DIM.INDEXES no longer declares. Field indexes and indexes made by
 * hand under other names are left alone.
 */
function undeclaredIndexDrops(
  dim: DimensionDef,
  existingIndexes: ReadonlySet<string>,
  previous: DimensionDef | undefined,
): IndexBuild[] {
  const prefixes = [dim.tableName, ...(previous ? [previous.tableName] : [])].map(compositeIndexPrefix);
  const keep = new Set(declaredIndexes(dim).map((ix) => ix.name));
  for (const d of [dim, ...(previous ? [previous] : [])]) {
    for (const f of d.fields) {
      for (const table of [dim.tableName, d.tableName]) {
        for (const name of fieldIndexNames(table, f.code, d.idField)) keep.add(name);
      }
    }
  }
  return [...existingIndexes]
    .filter((name) => prefixes.some((p) => name.startsWith(p)) && name.endsWith("_idx") && !keep.has(name))
    .sort()
    .map((name) => ({ kind: "drop", name }));
}

const FAMILY: Record<string, string> = {
  "character varying": "varchar",
  character: "varchar",
  text: "text",
  bigint: "bigint",
  integer: "bigint",
  smallint: "bigint",
  numeric: "numeric",
  boolean: "boolean",
  jsonb: "jsonb",
  json: "jsonb",
};

export async function readColumns(tx: Queryable, table: string): Promise<ExistingColumn[] | null> {
  const res = await tx.query<{
    column_name: string;
    data_type: string;
    character_maximum_length: number | null;
    numeric_precision: number | null;
    numeric_scale: number | null;
    is_nullable: string;
    is_identity: string;
  }>(
    `SELECT column_name, data_type, character_maximum_length, numeric_precision, numeric_scale, is_nullable,
            is_identity
       FROM information_schema.columns
      WHERE table_schema = current_schema() AND table_name = $1
      ORDER BY ordinal_position`,
    [table],
  );
  if (!res.rows.length) return null;
  return res.rows.map((r) => ({
    name: r.column_name,
    family: FAMILY[r.data_type] ?? r.data_type,
    length: r.character_maximum_length,
    precision: r.numeric_precision,
    scale: r.numeric_scale,
    nullable: r.is_nullable === "YES",
    identity: r.is_identity === "YES",
  }));
}

export interface SyncResult {
  created: string[];
  altered: string[];
  statements: string[];
  /**
   * With `deferIndexes`: the index builds of existing tables, left for the caller to run after its
   * commit with CONCURRENTLY (indexBuildSql), each with the code of its table's dimension.
   */
  deferred?: DeferredIndexBuild[];
}

/** An index build left for after the commit, and the dimension whose table it is on. */
export type DeferredIndexBuild = IndexBuild & { dim: string };

export interface SyncOptions {
  deferIndexes?: boolean;
}

const RELATION_KINDS: Record<string, string> = {
  r: "table",
  p: "table",
  i: "index",
  I: "index",
  S: "sequence",
  v: "view",
  m: "materialized view",
  c: "type",
  f: "foreign table",
  t: "TOAST table",
};

function isTable(kind: string | undefined): boolean {
  return kind === "r" || kind === "p";
}

/** Relations (tables, indexes, sequences, views…) of the current schema with one of `names`. */
export async function relationKinds(tx: Queryable, names: readonly string[]): Promise<Map<string, string>> {
  if (!names.length) return new Map();
  const res = await tx.query<{ relname: string; relkind: string }>(
    `SELECT c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = current_schema() AND c.relname = ANY($1::text[])`,
    [names],
  );
  return new Map(res.rows.map((r) => [r.relname, r.relkind]));
}

async function readPrimaryKey(tx: Queryable, table: string): Promise<ExistingPrimaryKey | null> {
  const res = await tx.query<{ conname: string; column_name: string }>(
    `SELECT con.conname, a.attname AS column_name
       FROM pg_constraint con
       JOIN pg_class c ON c.oid = con.conrelid
       JOIN pg_namespace n ON n.oid = c.relnamespace
       JOIN LATERAL unnest(con.conkey) WITH ORDINALITY AS k(attnum, ord) ON true
       JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum
      WHERE con.contype = 'p' AND c.relname = $1 AND n.nspname = current_schema()
      ORDER BY k.ord`,
    [table],
  );
  if (!res.rows.length) return null;
  return { name: res.rows[0]!.conname, columns: res.rows.map((r) => r.column_name) };
}

/** The table's indexes by name, and those of them that are not valid (a failed concurrent build). */
async function readIndexNames(
  tx: Queryable,
  table: string,
): Promise<{ all: Set<string>; invalid: Set<string> }> {
  const res = await tx.query<{ indexname: string; valid: boolean }>(
    `SELECT ic.relname AS indexname, i.indisvalid AS valid
       FROM pg_index i
       JOIN pg_class ic ON ic.oid = i.indexrelid
       JOIN pg_class t ON t.oid = i.indrelid
       JOIN pg_namespace n ON n.oid = t.relnamespace
      WHERE n.nspname = current_schema() AND t.relname = $1`,
    [table],
  );
  return {
    all: new Set(res.rows.map((r) => r.indexname)),
    invalid: new Set(res.rows.filter((r) => !r.valid).map((r) => r.indexname)),
  };
}

/** Questions about the rows of an existing table. */
function tableData(tx: Queryable, table: string): TableData {
  const t = ident(table);
  return {
    holdsValues: async (c) =>
      (await tx.query(`SELECT 1 FROM ${t} WHERE ${ident(c)} IS NOT NULL LIMIT 1`)).rows.length > 0,
    hasNulls: async (c) =>
      (await tx.query(`SELECT 1 FROM ${t} WHERE ${ident(c)} IS NULL LIMIT 1`)).rows.length > 0,
    maxLength: async (c) =>
      Number(
        (await tx.query<{ m: number | null }>(`SELECT max(length(${ident(c)}::text)) AS m FROM ${t}`)).rows[0]
          ?.m ?? 0,
      ),
    rowCount: async () => (await tx.query(`SELECT 1 FROM ${t} LIMIT 1`)).rows.length,
  };
}

interface TableStep {
  statements: string[];
  /** An existing table's index builds (TablePlan.indexBuilds); a new table's are in `statements`. */
  indexBuilds: IndexBuild[];
  problems: Problem[];
  create: boolean;
  /** Relation names the statements create: none may exist already. */
  claims: string[];
}

function tableProblem(dim: DimensionDef, message: string): TableStep {
  return {
    statements: [],
    indexBuilds: [],
    problems: [{ path: `${dim.code}.TABLE_NAME`, message }],
    create: false,
    claims: [],
  };
}

/**
 * An empty table whose TABLE_NAME changed is renamed, with its primary key and indexes; the
 * rest of the plan then reads the renamed table under its new names.
 */
function renameStatements(
  dim: DimensionDef,
  prev: DimensionDef,
  indexes: ReadonlySet<string>,
  pk: ExistingPrimaryKey | null,
): { statements: string[]; indexes: Set<string>; pk: ExistingPrimaryKey | null; claims: string[] } {
  const table = ident(dim.tableName);
  const statements = [`ALTER TABLE ${ident(prev.tableName)} RENAME TO ${table}`];
  const claims = [dim.tableName];
  const renamed = new Set(indexes);
  let key = pk;
  if (pk && pk.name !== primaryKeyName(dim.tableName)) {
    statements.push(
      `ALTER TABLE ${table} RENAME CONSTRAINT ${ident(pk.name)} TO ${ident(primaryKeyName(dim.tableName))}`,
    );
    renamed.delete(pk.name);
    key = { ...pk, name: primaryKeyName(dim.tableName) };
    renamed.add(key.name);
    claims.push(key.name);
  }
  const codes = new Set([...prev.fields, ...dim.fields].map((f) => f.code));
  // Each name a field's index has under the old table name, to the same form under the new one.
  const moves = [...codes].flatMap((code) => {
    const to = fieldIndexNames(dim.tableName, code, prev.idField);
    return fieldIndexNames(prev.tableName, code, prev.idField).map((from, i) => [from, to[i]!] as const);
  });
  for (const [from, to] of moves) {
    if (!indexes.has(from) || from === to) continue;
    statements.push(`ALTER INDEX ${ident(from)} RENAME TO ${ident(to)}`);
    renamed.delete(from);
    renamed.add(to);
    claims.push(to);
  }
  return { statements, indexes: renamed, pk: key, claims };
}

/**
 * Plans one dimension's table. `prev` is the dimension before the change (undefined: a new one);
 * `knowsPrevious` says whether the caller gave the previous metadata at all.
 */
async function planTable(
  tx: Queryable,
  dim: DimensionDef,
  prev: DimensionDef | undefined,
  knowsPrevious: boolean,
): Promise<TableStep> {
  const renaming = prev !== undefined && prev.tableName !== dim.tableName;
  const kinds = await relationKinds(tx, renaming ? [dim.tableName, prev.tableName] : [dim.tableName]);
  const target = kinds.get(dim.tableName);
  if (target !== undefined && !isTable(target)) {
    return tableProblem(
      dim,
      `${dim.tableName} is the name of an existing ${RELATION_KINDS[target] ?? "relation"} of the database, not a table of ${dim.code}: choose another TABLE_NAME`,
    );
  }
  if (renaming && target !== undefined) {
    return tableProblem(
      dim,
      `cannot move ${dim.code} from table ${prev.tableName} to ${dim.tableName}: a table ${dim.tableName} exists already`,
    );
  }
  let source = dim.tableName;
  if (renaming && isTable(kinds.get(prev.tableName))) {
    if ((await tableData(tx, prev.tableName).rowCount()) > 0) {
      return tableProblem(
        dim,
        `changing TABLE_NAME from ${prev.tableName} to ${dim.tableName} is refused: ${prev.tableName} holds rows`,
      );
    }
    source = prev.tableName;
  } else if (target === undefined) {
    const claims = [
      dim.tableName,
      primaryKeyName(dim.tableName),
      ...[...tableIndexes(dim), ...declaredIndexes(dim)].map((ix) => ix.name),
    ];
    return { statements: createTableSql(dim), indexBuilds: [], problems: [], create: true, claims };
  }
  return planExistingTable(tx, dim, prev, source, knowsPrevious);
}

/** Plans the changes to an existing table (`source`: its current name, before a rename). */
async function planExistingTable(
  tx: Queryable,
  dim: DimensionDef,
  prev: DimensionDef | undefined,
  source: string,
  knowsPrevious: boolean,
): Promise<TableStep> {
  const existing = (await readColumns(tx, source)) ?? [];
  if (knowsPrevious && !prev && !existing.some((c) => c.name === TENANT_COLUMN)) {
    return tableProblem(
      dim,
      `${dim.tableName} is an existing table that is not a dimension table: choose another TABLE_NAME`,
    );
  }
  const found = await readIndexNames(tx, source);
  let indexes = found.all;
  let pk = await readPrimaryKey(tx, source);
  const pre: string[] = [];
  const claims: string[] = [];
  if (source !== dim.tableName) {
    const moved = renameStatements(dim, prev!, indexes, pk);
    pre.push(...moved.statements);
    claims.push(...moved.claims);
    indexes = moved.indexes;
    pk = moved.pk;
  }
  const plan = await planAlter(dim, existing, indexes, tableData(tx, source), {
    ...(prev ? { previous: prev } : {}),
    primaryKey: pk,
    invalidIndexes: found.invalid,
  });
  for (const ix of [...tableIndexes(dim), ...declaredIndexes(dim)])
    if (!indexes.has(ix.name)) claims.push(ix.name);
  const keyMoves = !pk || !sameColumns(pk.columns, [TENANT_COLUMN, dim.idField]);
  if (keyMoves && pk?.name !== primaryKeyName(dim.tableName)) claims.push(primaryKeyName(dim.tableName));
  return {
    statements: [...pre, ...plan.statements],
    indexBuilds: plan.indexBuilds,
    problems: plan.problems,
    create: false,
    claims,
  };
}

/** Names a table's statements would create that another relation already holds. */
async function claimProblems(tx: Queryable, dim: DimensionDef, step: TableStep): Promise<Problem[]> {
  if (!step.statements.length && !step.indexBuilds.length) return [];
  const taken = await relationKinds(tx, step.claims);
  return [...taken].map(([name, kind]) => ({
    path: `${dim.code}.TABLE_NAME`,
    message: `${dim.tableName} needs the name ${name}, which an existing ${RELATION_KINDS[kind] ?? "relation"} of the database holds: choose another TABLE_NAME`,
  }));
}

/**
 * Brings every dimension table in line with the metadata, inside the caller's transaction.
 * `previous` (the dimensions as the metadata described them before the change) lets it refuse
 * DATA_TYPE changes of columns holding values and move a table whose TABLE_NAME changed.
 * All problems of all tables are collected first; if there is any, nothing is applied.
 */
export async function syncTables(
  tx: Queryable,
  dims: Iterable<DimensionDef>,
  previous?: ReadonlyMap<string, DimensionDef>,
  opts: SyncOptions = {},
): Promise<SyncResult> {
  await tx.query("SELECT pg_advisory_xact_lock($1)", [DDL_LOCK_KEY]);
  const plans: Array<{ dim: DimensionDef; step: TableStep }> = [];
  const problems: Problem[] = [];
  const list = [...dims];
  // Table names that a rename in this same change gives up: nothing else may take them at once.
  const vacated = new Set(
    list.flatMap((d) => {
      const before = previous?.get(d.code)?.tableName;
      return before && before !== d.tableName ? [before] : [];
    }),
  );
  for (const dim of list) {
    if (vacated.has(dim.tableName) && previous?.get(dim.code)?.tableName !== dim.tableName) {
      problems.push({
        path: `${dim.code}.TABLE_NAME`,
        message: `${dim.tableName} is given up by another dimension in the same change: move the tables one change at a time`,
      });
      continue;
    }
    const step = await planTable(tx, dim, previous?.get(dim.code), previous !== undefined);
    problems.push(...step.problems, ...(step.problems.length ? [] : await claimProblems(tx, dim, step)));
    plans.push({ dim, step });
  }
  if (problems.length) {
    const naming = problems.every((p) => p.path.endsWith(".TABLE_NAME"));
    const unscoping = problems.every((p) => p.path.endsWith(".ROW_SCOPE"));
    throw new UnsafeSchemaChangeError(
      naming
        ? "The metadata change names a table that cannot be used or moved; nothing was applied."
        : unscoping
          ? "The metadata change removes a ROW_SCOPE key whose system column holds values: clear the column first (see errors); nothing was applied."
          : "The metadata change would lose data; nothing was applied.",
      problems,
    );
  }
  const result: SyncResult = { created: [], altered: [], statements: [] };
  const deferred: DeferredIndexBuild[] = [];
  if (opts.deferIndexes) result.deferred = deferred;
  for (const { dim, step } of plans) {
    for (const statement of step.statements) await tx.query(statement);
    const builds = step.indexBuilds.map((build) => indexBuildSql(build, { concurrently: false }));
    if (opts.deferIndexes) deferred.push(...step.indexBuilds.map((build) => ({ ...build, dim: dim.code })));
    else for (const statement of builds) await tx.query(statement);
    const all = [...step.statements, ...builds];
    result.statements.push(...all);
    if (step.create) result.created.push(dim.tableName);
    else if (all.length) result.altered.push(dim.tableName);
  }
  return result;
}
