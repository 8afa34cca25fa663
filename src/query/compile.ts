// Plan -> parameterised SQL. Identifiers come only from the metadata (quoted by ident()); every value
// is a $n parameter, so the SQL text of a request shape is stable (one prepared plan per shape).
// Comparisons follow two-valued logic: a condition on a null column is false, its negation (ne,
// nin, not) true, which is what the in-memory evaluation of the property test checks.
import { ident } from "../db/sql.ts";
import { TENANT_COLUMN } from "../metadata/data-types.ts";
import { searchTextSql } from "../metadata/search-text.ts";
import type { FieldDef } from "../types.ts";
import type {
  CompiledQuery,
  CountScope,
  ExpandPlan,
  GroupsPlan,
  PlanScope,
  PlannedCondition,
  PlannedFilter,
  RecordsPlan,
} from "./types.ts";
import { groupKeyAsText } from "./types.ts";
import { TEXT_OPERATORS } from "./values.ts";

/** A statement's parameters: `add` appends to `values` (the array given, not a copy of it). */
class Params {
  constructor(readonly values: unknown[] = []) {}
  add(value: unknown): string {
    this.values.push(value);
    return `$${this.values.length}`;
  }
}

const column = (f: FieldDef) => `t.${ident(f.code)}`;

const COMPARATORS = { gt: ">", gte: ">=", lt: "<", lte: "<=" } as const;

function compileCondition(c: PlannedCondition, p: Params): string {
  const col = column(c.field);
  if (TEXT_OPERATORS.has(c.op)) return `${col} LIKE ${p.add(c.value)}`;
  switch (c.op) {
    case "eq":
      return c.value === null ? `${col} IS NULL` : `${col} = ${p.add(c.value)}`;
    case "ne":
      if (c.value === null) return `${col} IS NOT NULL`;
      return c.field.nullable ? `${col} IS DISTINCT FROM ${p.add(c.value)}` : `${col} <> ${p.add(c.value)}`;
    case "in":
      return `${col} = ANY(${p.add(c.value)})`;
    case "nin":
      return c.field.nullable
        ? `(${col} = ANY(${p.add(c.value)})) IS NOT TRUE`
        : `${col} <> ALL(${p.add(c.value)})`;
    case "between": {
      const [low, high] = c.value as [unknown, unknown];
      return `${col} BETWEEN ${p.add(low)} AND ${p.add(high)}`;
    }
    default:
      return `${col} ${COMPARATORS[c.op as keyof typeof COMPARATORS]} ${p.add(c.value)}`;
  }
}

/** `tenant`: the placeholder of the caller's tenant (the search filter's subquery reads it too). */
function compileFilter(f: PlannedFilter, p: Params, tenant: string): string {
  switch (f.kind) {
    case "condition":
      return compileCondition(f, p);
    case "live":
      return `t."TREC" <> 'C'`;
    case "none":
      return "FALSE";
    case "search": {
      // The search indexer's rows (src/events/search.ts): same tenant, same dimension, the words.
      // An uncorrelated `key IN (…)` kept out of the join planner (IS TRUE stops its pull-up into a
      // semi-join): the index rows are read once into a hash and each record is a hash probe,
      // whatever the statistics say. As a join, a planner without statistics (PGlite never
      // gathers them itself) guessed one matching row and rescanned the index per record
      // (issue 18: 8.9 s for 1,200 records). Neither side is ever NULL, so IS TRUE changes nothing.
      // The index row may have been built when other fields were searchable (a field hidden by a
      // weight since): a record it yields matches only if the words are in its text derived now,
      // from its own columns of the fields searchable now (decisions.md, "Search follows field
      // visibility"). The planner runs that check after the cheap hash probe, on candidates only.
      if (f.fields.length === 0) return "FALSE";
      const words = p.add(f.text);
      const indexed = `((${column(f.idField)})::text IN (SELECT s."RECORD_ID" FROM "TB_SEARCH" AS s WHERE s."TENANT_ID" = ${tenant} AND s."DIMENSION" = ${p.add(f.dimension)} AND to_tsvector('simple', s."TEXT") @@ plainto_tsquery('simple', ${words}))) IS TRUE`;
      return `(${indexed} AND to_tsvector('simple', ${searchTextSql(f.fields, "t")}) @@ plainto_tsquery('simple', ${words}))`;
    }
    case "not":
      return `(${compileFilter(f.item, p, tenant)}) IS NOT TRUE`;
    case "and":
      return f.items.map((item) => compileFilter(item, p, tenant)).join(" AND ");
    case "or":
      return `(${f.items
        .map((item) =>
          item.kind === "and" ? `(${compileFilter(item, p, tenant)})` : compileFilter(item, p, tenant),
        )
        .join(" OR ")})`;
  }
}

/** `FROM table AS t WHERE tenant = $1 AND ...`: the tenant is always the first parameter. */
function fromWhere(scope: PlanScope, p: Params): string {
  const placeholder = p.add(scope.tenantId);
  let where = `t.${ident(TENANT_COLUMN)} = ${placeholder}`;
  if (scope.rowScope) where += ` AND (${compileFilter(scope.rowScope, p, placeholder)})`;
  if (scope.where) where += ` AND ${compileFilter(scope.where, p, placeholder)}`;
  return `FROM ${ident(scope.dim.tableName)} AS t\nWHERE ${where}`;
}

/**
 * A row scope as ` AND (…)` over the alias `t`, its values appended to `params` (the tenant's
 * placeholder given for a search condition): for statements written outside the planner (the
 * write path's row locks, lookups).
 */
export function rowScopeSql(rowScope: PlannedFilter | null, params: unknown[], tenant: string): string {
  if (!rowScope) return "";
  return ` AND (${compileFilter(rowScope, new Params(params), tenant)})`;
}

/**
 * A scope's `FROM … WHERE …` compiled once, with its parameters ($1 the tenant, then the filter's):
 * what opens every statement of the scope (its page, its count), and what identifies its count.
 */
export interface ScopeSql {
  readonly from: string;
  readonly params: readonly unknown[];
}

export function compileScope(scope: PlanScope): ScopeSql {
  const p = new Params();
  const from = fromWhere(scope, p);
  return { from, params: p.values };
}

/** Parameters that continue a compiled scope's (the statement's next placeholder follows them). */
const after = (sql: ScopeSql) => new Params([...sql.params]);

function selectList(fields: readonly FieldDef[]): string {
  return fields.map(column).join(", ");
}

/**
 * NULL sorts last in both directions (decisions §11). PostgreSQL puts NULL last in ASC already;
 * DESC needs NULLS LAST, written only for nullable columns so that a NOT NULL column (the id)
 * keeps its index scan.
 */
function direction(dir: "asc" | "desc", nullable: boolean): string {
  return dir === "desc" ? (nullable ? "DESC NULLS LAST" : "DESC") : "ASC";
}

/** A key of a keyset: its SQL, its direction, whether it may be NULL, and the cursor's value. */
interface KeysetKey {
  readonly col: string;
  readonly direction: "asc" | "desc";
  readonly nullable: boolean;
  readonly value: unknown;
}

/**
 * The keyset predicate of a cursor page (decisions §21): the rows after `plan.keyset.after` in the
 * ORDER BY's own order, as ` AND (…)`, or "" without one.
 */
function keysetPredicate(plan: RecordsPlan, p: Params): string {
  const values = plan.keyset?.after;
  if (!values) return "";
  const keys = plan.sort.map((s, i) => ({
    col: column(s.field),
    direction: s.direction,
    nullable: s.field.nullable,
    value: values[i],
  }));
  return ` AND ${rowsAfter(keys, p)}`;
}

/**
 * The rows after the cursor's values in the order of `keys` (a list's sort, a grouping's). NULL
 * sorts last in both directions (direction() above), so for one key "after x" is `col > x` (asc)
 * or `col < x` (desc), or the column NULL when it may be; nothing is after a NULL but more NULLs,
 * which the next keys order. The keys expand to the OR-chain (k1 after) OR (k1 = x1 AND k2 after)
 * OR …; when every key is NOT NULL and sorted one way, one row comparison `(k1, …, id) > (x1, …,
 * id0)` says the same and an index on the keys serves it. A leading bound on the first key (NOT
 * NULL) helps the planner to a range scan whatever the rest. When nothing can follow (the last
 * keys all NULL, or no key at all), FALSE.
 */
function rowsAfter(keys: readonly KeysetKey[], p: Params): string {
  if (!keys.length) return "false";
  const uniform = keys.every((k) => !k.nullable && k.direction === keys[0]!.direction);
  if (uniform) {
    const op = keys[0]!.direction === "asc" ? ">" : "<";
    const params = keys.map((k) => p.add(k.value));
    if (keys.length === 1) return `${keys[0]!.col} ${op} ${params[0]}`;
    return `(${keys.map((k) => k.col).join(", ")}) ${op} (${params.join(", ")})`;
  }
  const placeholders = keys.map((k) => (k.value === null ? null : p.add(k.value)));
  const after = (i: number): string | null => {
    const k = keys[i]!;
    const x = placeholders[i];
    if (x === null) return null;
    const beyond = `${k.col} ${k.direction === "asc" ? ">" : "<"} ${x}`;
    return k.nullable ? `(${beyond} OR ${k.col} IS NULL)` : beyond;
  };
  const equal = (i: number) => {
    const x = placeholders[i];
    return x === null ? `${keys[i]!.col} IS NULL` : `${keys[i]!.col} = ${x}`;
  };
  const terms: string[] = [];
  for (let i = 0; i < keys.length; i++) {
    const beyond = after(i);
    if (beyond === null) continue;
    const prefix = keys.slice(0, i).map((_, j) => equal(j));
    terms.push(prefix.length ? `(${[...prefix, beyond].join(" AND ")})` : beyond);
  }
  // A list's id is last and never NULL, so its term is there; a grouping's keys may all be NULL.
  if (!terms.length) return "false";
  const chain = `(${terms.join(" OR ")})`;
  const first = keys[0]!;
  const lead = placeholders[0];
  if (first.nullable || lead === null || lead === undefined) return chain;
  return `${first.col} ${first.direction === "asc" ? ">=" : "<="} ${lead} AND ${chain}`;
}

function orderBy(plan: RecordsPlan, alias: string): string {
  return plan.sort
    .map((s) => `${alias}.${ident(s.field.code)} ${direction(s.direction, s.field.nullable)}`)
    .join(", ");
}

/**
 * The page and the total in one statement. The total is counted only when the page cannot tell
 * it: a page shorter than the limit (and not past the end) is the last one, so the total is
 * offset + its rows. Otherwise an uncorrelated count runs; PostgreSQL evaluates such a subquery
 * (an InitPlan) only when the CASE reaches it. The page keeps its own ORDER BY and LIMIT (an index
 * on the sort key is used); the join yields one row even for an empty page (the id is then null).
 */
/**
 * A forward relation ($expand of a foreign key) embedded in the page's own statement: its key and
 * the target's key have one type, so they compare in SQL. Other relations go through the loaders.
 */
export function joinsInPage(e: ExpandPlan): boolean {
  return e.direction === "forward" && e.parentKey.dataType === e.targetKey.dataType;
}

/**
 * The page row's column holding field `code` of the record embedded for `plan.expand[index]`: a
 * name no field can have (fields are identifiers, without dots or a leading underscore).
 */
export const embeddedColumn = (index: number, code: string) => `__x${index}.${code}`;

/** Quotes an alias made here from an index and a validated field code (see embeddedColumn). */
function quoteAlias(alias: string): string {
  if (!/^__x\d+(\.[A-Za-z][A-Za-z0-9_]*)?$/.test(alias))
    throw new Error(`Refusing alias ${JSON.stringify(alias)}`);
  return `"${alias}"`;
}

/**
 * The joins that embed the plan's forward relations in a page whose rows are `source`: for each,
 * the live record of the tenant that the row's key names (at most one), its columns aliased by
 * embeddedColumn, NULL when none.
 */
function embeddedRelations(plan: RecordsPlan, p: Params, source: string): { columns: string; joins: string } {
  const columns: string[] = [];
  const joins: string[] = [];
  plan.expand.forEach((e, index) => {
    if (!joinsInPage(e)) return;
    const alias = quoteAlias(`__x${index}`);
    const fields = relationColumns(e);
    joins.push(
      `LEFT JOIN LATERAL (SELECT ${fields.map((f) => `t.${ident(f.code)} AS ${quoteAlias(embeddedColumn(index, f.code))}`).join(", ")}` +
        ` FROM ${ident(e.target.tableName)} AS t WHERE ${targetScope(e, p, plan.tenantId)}` +
        ` AND t.${ident(e.targetKey.code)} = ${source}.${ident(e.parentKey.code)}` +
        // As the loader picks among several matches (a key that is not the target's id): the first id.
        ` ORDER BY t.${ident(e.target.idField)} LIMIT 1) AS ${alias} ON true`,
    );
    columns.push(`${alias}.*`);
  });
  return { columns: columns.map((c) => `, ${c}`).join(""), joins: joins.map((j) => `\n${j}`).join("") };
}

/**
 * Whether a records statement's best plan is the same whatever its values, so that PostgreSQL may
 * plan it once per connection and keep the plan (QueryOptions.plan "generic") instead of planning
 * every execution (the service's default, src/db/connection.ts: a read's best plan depends on its
 * values). That holds for the tenant's rows found or ordered by the dimension's id alone, which
 * its key (TENANT_ID, id) serves whatever the tenant's size: a look-up by id, a page in id order
 * (a cursor after an id included), live rows or all, with forward relations embedded by their
 * target's id. A filter on another field, a sort by one, a TREC choice, a search or a row scope
 * make it depend on the values (how many rows they match), and keep the custom plan. Planning
 * such a page with one relation embedded costs PostgreSQL about 0.09 ms, more than running it.
 */
function keyedPlan(plan: RecordsPlan, embedded: boolean): boolean {
  const id = plan.dim.idField;
  if (plan.rowScope || !byIdAlone(plan.where, id)) return false;
  if (plan.sort.length > 1 || (plan.sort.length === 1 && plan.sort[0]!.field.code !== id)) return false;
  return !embedded || plan.expand.every((e) => !joinsInPage(e) || keyedRelation(e));
}

/** A filter that only keeps live rows or names ids (eq a value): nothing whose selectivity varies. */
function byIdAlone(f: PlannedFilter | null, id: string): boolean {
  if (!f) return true;
  switch (f.kind) {
    case "live":
      return true;
    case "condition":
      return f.op === "eq" && f.field.code === id && f.value !== null;
    case "and":
      return f.items.every((item) => byIdAlone(item, id));
    default:
      return false;
  }
}

/** A relation whose target rows are found by the target's id, unscoped: one key look-up each. */
function keyedRelation(e: ExpandPlan): boolean {
  return e.direction === "forward" && e.rowScope === null && e.targetKey.code === e.target.idField;
}

/** `q` asking for a generic plan when `generic` (keyedPlan, keyedRelation), else as it is (custom). */
function withPlanMode(q: CompiledQuery, generic: boolean): CompiledQuery {
  return generic ? { ...q, plan: "generic" } : q;
}

export function compileRecordsPage(
  plan: RecordsPlan,
  countBound: number | null = null,
  opts: { embed?: boolean; scope?: ScopeSql } = {},
): CompiledQuery {
  const scope = opts.scope ?? compileScope(plan);
  const p = after(scope);
  const { from } = scope;
  const keyset = keysetPredicate(plan, p);
  const limit = p.add(plan.limit);
  const offset = p.add(plan.offset);
  // Bounded (decisions §11): counting stops one past the bound; the resolver then asks the planner.
  const embedded = opts.embed ? embeddedRelations(plan, p, "p") : { columns: "", joins: "" };
  const count =
    countBound === null
      ? `(SELECT count(*) ${from})`
      : `(SELECT count(*) FROM (SELECT 1 ${from}\nLIMIT ${p.add(countBound + 1)}) AS b)`;
  // A cursor page cannot tell the total from its rows (the rows before the cursor are not in it):
  // the whole filtered set is always counted.
  const total = plan.keyset
    ? `${count} AS "__total", p.*${embedded.columns}`
    : `CASE WHEN n."n" < ${limit} AND (n."n" > 0 OR ${offset} = 0) THEN ${offset} + n."n"\nELSE ${count} END AS "__total", p.*${embedded.columns}`;
  const text = [
    `WITH p AS (`,
    `SELECT ${selectList(plan.selected)}`,
    `${from}${keyset}`,
    `ORDER BY ${orderBy(plan, "t")}`,
    `LIMIT ${limit} OFFSET ${offset}`,
    `), n AS (SELECT count(*) AS "n" FROM p)`,
    `SELECT ${total}`,
    `FROM n LEFT JOIN p ON true${embedded.joins}`,
    `ORDER BY ${orderBy(plan, "p")}`,
  ].join("\n");
  return { text, params: p.values };
}

/** The planner's row estimate for a plan's matches (EXPLAIN, nothing is read). */
export function compileCountEstimate(plan: PlanScope, sql: ScopeSql = compileScope(plan)): CompiledQuery {
  return { text: `EXPLAIN (FORMAT JSON) SELECT 1 ${sql.from}`, params: sql.params };
}

/** The rows of a plan without the total (single-record reads, and pages whose total is not wanted). */
export function compileRecordsSelect(
  plan: RecordsPlan,
  paging: boolean,
  opts: { embed?: boolean; scope?: ScopeSql } = {},
): CompiledQuery {
  const scope = opts.scope ?? compileScope(plan);
  const p = after(scope);
  const lines = [`SELECT ${selectList(plan.selected)}`, `${scope.from}${keysetPredicate(plan, p)}`];
  if (plan.sort.length) lines.push(`ORDER BY ${orderBy(plan, "t")}`);
  if (paging) lines.push(`LIMIT ${p.add(plan.limit)} OFFSET ${p.add(plan.offset)}`);
  const embed = opts.embed === true && plan.expand.some(joinsInPage);
  const generic = keyedPlan(plan, embed);
  if (!embed) return withPlanMode({ text: lines.join("\n"), params: p.values }, generic);
  // The page first, then its relations joined to its rows (not to every row the filter matches).
  const embedded = embeddedRelations(plan, p, "p");
  const order = plan.sort.length ? `\nORDER BY ${orderBy(plan, "p")}` : "";
  const text = `SELECT p.*${embedded.columns}\nFROM (\n${lines.join("\n")}\n) AS p${embedded.joins}${order}`;
  return withPlanMode({ text, params: p.values }, generic);
}

export function compileCount(scope: PlanScope, sql: ScopeSql = compileScope(scope)): CompiledQuery {
  return { text: `SELECT count(*) AS "count"\n${sql.from}`, params: sql.params };
}

function searches(f: PlannedFilter | null): boolean {
  if (!f) return false;
  switch (f.kind) {
    case "search":
      return true;
    case "not":
      return searches(f.item);
    case "and":
    case "or":
      return f.items.some(searches);
    default:
      return false;
  }
}

/**
 * What identifies a scope's count (the totals cache's key): its compiled FROM … WHERE and
 * parameters, which hold the tenant, the filter and the access rules, under `mode` (exact, or
 * counted to a bound) and the metadata version. Null for a scope whose count may change without a
 * write: a full-text search (its index is updated after the write).
 */
export function countKey(
  scope: PlanScope,
  sql: ScopeSql,
  mode: string,
  version: number | string,
): string | null {
  if (searches(scope.where)) return null;
  return `${version}\u0000${mode}\u0000${scope.dim.code}\u0000${sql.from}\u0000${JSON.stringify(sql.params)}`;
}

/** The tenant and dimension a scope's count reads (what a write to them makes stale). */
export function countScopeOf(scope: PlanScope): CountScope {
  return { tenantId: scope.tenantId, dim: scope.dim.code };
}

/** Column aliases of a grouped result: g0.. for groups, a0.. for aggregates (names may be long). */
export const groupAlias = (i: number) => `g${i}`;
export const aggregateAlias = (i: number) => `a${i}`;

/** The column of a grouped result's sort key `i` read as text (groupKeyAsText). */
export const groupKeyTextAlias = (i: number) => `k${i}`;

/**
 * A grouped page. With `opts.endKey` (a GraphQL page that gives its end_cursor), its COUNT, SUM
 * and AVG sort keys are read as text too (groupKeyTextAlias); with `plan.keyset`, the groups after
 * the cursor's (HAVING: the keys are the groups' own values and aggregates). The count of groups
 * is never narrowed by the keyset (a cursor page's total is the whole grouping's).
 */
export function compileGroupsPage(
  plan: GroupsPlan,
  withTotal = true,
  opts: { endKey?: boolean } = {},
): CompiledQuery {
  const p = new Params();
  const from = fromWhere(plan, p);
  const groups = plan.groupBy.map((f, i) => `${column(f)} AS ${ident(groupAlias(i))}`);
  const aggregateSql = (a: GroupsPlan["aggregates"][number]) =>
    `${a.fn.toLowerCase()}(${a.field ? column(a.field) : "*"})`;
  const aggregates = plan.aggregates.map((a, i) => `${aggregateSql(a)} AS ${ident(aggregateAlias(i))}`);
  const textKeys =
    opts.endKey || plan.keyset
      ? plan.sort.flatMap((s, i) =>
          s.key.kind === "aggregate" && groupKeyAsText(s.key)
            ? [`${aggregateSql(s.key.aggregate)}::text AS ${ident(groupKeyTextAlias(i))}`]
            : [],
        )
      : [];
  const groupBy = plan.groupBy.length ? `\nGROUP BY ${plan.groupBy.map(column).join(", ")}` : "";
  const values = plan.keyset?.after;
  const having = values
    ? `\nHAVING ${rowsAfter(
        plan.sort.map((s, i) => ({
          col: s.key.kind === "field" ? column(s.key.field) : aggregateSql(s.key.aggregate),
          direction: s.direction,
          // The groups sort NULL last as nullable keys do (any group field or aggregate may be).
          nullable: true,
          value: values[i],
        })),
        p,
      )}`
    : "";
  const sortAlias = (s: GroupsPlan["sort"][number]) =>
    s.key.kind === "field"
      ? groupAlias(plan.groupBy.indexOf(s.key.field))
      : aggregateAlias(plan.aggregates.indexOf(s.key.aggregate));
  const order = (alias: string) =>
    plan.sort.map((s) => `${alias}${ident(sortAlias(s))} ${direction(s.direction, true)}`).join(", ");
  // Without a total (`$count=none`) the groups are not counted: 1 stands in, never read.
  const total =
    plan.groupBy.length && withTotal
      ? `SELECT count(*) AS "__total" FROM (SELECT 1 ${from}${groupBy}) AS g`
      : `SELECT 1 AS "__total"`;
  const limit = p.add(plan.limit);
  const offset = p.add(plan.offset);
  const lines = [
    `SELECT c."__total", p.*`,
    `FROM (${total}) AS c`,
    `LEFT JOIN (`,
    `SELECT true AS "__row", ${[...groups, ...aggregates, ...textKeys].join(", ")}`,
    `${from}${groupBy}${having}`,
  ];
  if (plan.sort.length) lines.push(`ORDER BY ${order("")}`);
  lines.push(`LIMIT ${limit} OFFSET ${offset}`, `) AS p ON true`);
  if (plan.sort.length) lines.push(`ORDER BY ${order("p.")}`);
  return { text: lines.join("\n"), params: p.values };
}

/** The columns a relation batch selects: the returned ones, the key matched, the id for order. */
export function relationColumns(e: ExpandPlan): FieldDef[] {
  const need = new Set<FieldDef>([...e.columns, e.targetKey, e.target.fieldsByCode.get(e.target.idField)!]);
  return e.target.fields.filter((f) => need.has(f));
}

/**
 * One page per parent key in one statement (GraphQL reverse relations with their own where,
 * order and limit): the plan's rows whose `partition` field is one of `keys`, numbered per key in
 * the plan's order, cut to the plan's offset and limit per key.
 */
export function compilePartitionedPages(
  plan: RecordsPlan,
  partition: FieldDef,
  keys: readonly unknown[],
): CompiledQuery {
  const p = new Params();
  const id = plan.dim.fieldsByCode.get(plan.dim.idField)!;
  const order = plan.sort.length ? orderBy(plan, "t") : `${column(id)} ASC`;
  const from = fromWhere(plan, p);
  const keyList = p.add(keys);
  const first = p.add(plan.offset);
  const last = p.add(plan.offset + plan.limit);
  const text = [
    `SELECT * FROM (`,
    `SELECT ${selectList(plan.selected)}, ${column(partition)} AS "__parent",`,
    `       row_number() OVER (PARTITION BY ${column(partition)} ORDER BY ${order}) AS "__rn"`,
    `${from} AND ${column(partition)} = ANY(${keyList})`,
    `) AS t WHERE t."__rn" > ${first} AND t."__rn" <= ${last}`,
    `ORDER BY t."__parent", t."__rn"`,
  ].join("\n");
  return { text, params: p.values };
}

/** An embedded relation's target rows: the tenant's live ones within the caller's row scope. */
function targetScope(e: ExpandPlan, p: Params, tenantId: string): string {
  const tenant = p.add(tenantId);
  const scope = e.rowScope ? ` AND (${compileFilter(e.rowScope, p, tenant)})` : "";
  return `t.${ident(TENANT_COLUMN)} = ${tenant} AND t."TREC" <> 'C'${scope}`;
}

/**
 * One query for every key of a relation in a request (the DataLoader batch), in the target's id
 * order. A reverse relation's rows are cut to `e.limit` per key (issue 35 §5): numbered per key in
 * id order, the statement returns the first `limit` of each, so a parent with thousands of children
 * costs what its page does.
 */
export function compileRelationBatch(
  e: ExpandPlan,
  tenantId: string,
  keys: readonly unknown[],
): CompiledQuery {
  const p = new Params();
  const id = e.target.fieldsByCode.get(e.target.idField)!;
  const columns = selectList(relationColumns(e));
  const where = `WHERE ${targetScope(e, p, tenantId)} AND ${column(e.targetKey)} = ANY(${p.add(keys)})`;
  if (e.direction === "forward") {
    const text = [
      `SELECT ${columns}`,
      `FROM ${ident(e.target.tableName)} AS t`,
      where,
      `ORDER BY ${column(id)} ASC`,
    ];
    return withPlanMode({ text: text.join("\n"), params: p.values }, keyedRelation(e));
  }
  const text = [
    `SELECT ${columns} FROM (`,
    `SELECT ${columns},`,
    `       row_number() OVER (PARTITION BY ${column(e.targetKey)} ORDER BY ${column(id)} ASC) AS "__rn"`,
    `FROM ${ident(e.target.tableName)} AS t`,
    where,
    `) AS t WHERE t."__rn" <= ${p.add(e.limit)}`,
    `ORDER BY ${column(id)} ASC`,
  ];
  return { text: text.join("\n"), params: p.values };
}
