// Query model -> plan: every name checked against the dimension's metadata and the caller's field
// rights (spec 2.3, decisions.md §6), every value cast by its field's type, the limits of spec 8
// applied, the TREC rule of spec 3.1 added. What comes out can be compiled without further checks.
import { type AuthorizedDimension, accessView, type DimensionFields } from "../auth/access-view.ts";
import { scopeValuesOf } from "../auth/row-scope.ts";
import { CANONICAL_INTEGER } from "../metadata/data-types.ts";
import { searchableFields } from "../metadata/search-text.ts";
import type { Access, DimensionDef, FieldDef, Flag, MetadataModel, RequestContext } from "../types.ts";
import { relatedNotReadable } from "./access.ts";
import {
  fieldNotReadable,
  fieldNotSearchable,
  filterTooComplex,
  invalidCursor,
  invalidParameter,
  unknownField,
} from "./errors.ts";
import {
  type AggregateSpec,
  DEFAULT_RELATION_ROWS,
  type ExpandFields,
  type ExpandPlan,
  type FilterExpr,
  type FilterLiteral,
  type GroupSortKey,
  type GroupsPlan,
  groupKeyAsText,
  type ListPlan,
  type ListQuery,
  MAX_FILTER_CONDITIONS,
  MAX_FILTER_DEPTH,
  MAX_NUM_ROWS,
  type PlannedAggregate,
  type PlannedFilter,
  type PlannedSort,
  type PlanScope,
  type RecordQuery,
  type RecordsPlan,
  type SortSpec,
  type TrecState,
} from "./types.ts";
import { castFilterValue, castScalar } from "./values.ts";

const TREC = "TREC";

/** The field `name` names if the caller may know it exists (peso), else INVALID_FIELD. */
export function visibleFieldNamed(rules: DimensionFields, name: string): FieldDef {
  const field = rules.visibleField(name);
  if (!field) throw unknownField(name, rules.dim.code);
  return field;
}

/** A visible field the caller may filter or sort on (R), else INVALID_FIELD or FIELD_NOT_SEARCHABLE. */
export function searchableField(rules: DimensionFields, name: string): FieldDef {
  const field = visibleFieldNamed(rules, name);
  if (!rules.allows(field, "R")) throw fieldNotSearchable(name, rules.dim.code);
  return field;
}

// ---------------------------------------------------------------- filters

/** Same-kind groups merged into their parent: (a and (b and c)) is one level, not two. */
export function flattenFilter(expr: FilterExpr): FilterExpr {
  if (expr.kind === "condition") return expr;
  if (expr.kind === "not") return { kind: "not", item: flattenFilter(expr.item) };
  const items: FilterExpr[] = [];
  for (const item of expr.items.map(flattenFilter)) {
    if (item.kind === expr.kind) items.push(...item.items);
    else items.push(item);
  }
  return items.length === 1 ? items[0]! : { kind: expr.kind, items };
}

/** Nesting of boolean operators (and, or, not); a lone condition is depth 0. */
export function filterDepth(expr: FilterExpr): number {
  if (expr.kind === "condition") return 0;
  if (expr.kind === "not") return 1 + filterDepth(expr.item);
  return 1 + Math.max(0, ...expr.items.map(filterDepth));
}

export function countConditions(expr: FilterExpr): number {
  if (expr.kind === "condition") return 1;
  if (expr.kind === "not") return countConditions(expr.item);
  return expr.items.reduce((n, item) => n + countConditions(item), 0);
}

/** Checks the limits of spec 8 on a filter built by any adapter. */
export function checkFilterLimits(expr: FilterExpr): FilterExpr {
  const flat = flattenFilter(expr);
  const conditions = countConditions(flat);
  if (conditions > MAX_FILTER_CONDITIONS) {
    throw filterTooComplex(
      `The filter has ${conditions} conditions; at most ${MAX_FILTER_CONDITIONS} are allowed.`,
      {
        conditions,
        max_conditions: MAX_FILTER_CONDITIONS,
      },
    );
  }
  const depth = filterDepth(flat);
  if (depth > MAX_FILTER_DEPTH) {
    throw filterTooComplex(`The filter nests ${depth} levels; at most ${MAX_FILTER_DEPTH} are allowed.`, {
      depth,
      max_depth: MAX_FILTER_DEPTH,
    });
  }
  return flat;
}

/** What a filter may name: the field of each condition (or a 400), and whether NOT is allowed. */
export interface FilterRules {
  field(condition: Extract<FilterExpr, { kind: "condition" }>): FieldDef;
  /** Throws when the filter may not negate (lookups); absent: NOT is allowed. */
  refuseNot?: () => never;
}

/** A parsed filter as planned conditions: fields checked by `rules`, values cast by field type. */
export function planFilterExpr(expr: FilterExpr, rules: FilterRules): PlannedFilter {
  switch (expr.kind) {
    case "condition": {
      const field = rules.field(expr);
      return {
        kind: "condition",
        field,
        op: expr.op,
        value: castFilterValue(field, expr.op, expr.value, expr.origin),
        literal: expr.value,
      };
    }
    case "not":
      if (rules.refuseNot) rules.refuseNot();
      return { kind: "not", item: planFilterExpr(expr.item, rules) };
    default:
      return { kind: expr.kind, items: expr.items.map((item) => planFilterExpr(item, rules)) };
  }
}

function planExpr(rules: DimensionFields, expr: FilterExpr): PlannedFilter {
  return planFilterExpr(expr, { field: (c) => searchableField(rules, c.field) });
}

function mentionsTrec(expr: FilterExpr): boolean {
  if (expr.kind === "condition") return expr.field === TREC;
  if (expr.kind === "not") return mentionsTrec(expr.item);
  return expr.items.some(mentionsTrec);
}

/**
 * The WHERE of a read: the TREC rule (cond_trec, or TREC <> 'C' unless the filter names TREC)
 * and the request's filter. The tenant condition is added by the compiler, always.
 */
export function planWhere(
  dim: AuthorizedDimension<"read">,
  filter: FilterExpr | null,
  condTrec: readonly TrecState[] | null,
  search: string | null = null,
): PlannedFilter | null {
  const items: PlannedFilter[] = [];
  const idField = dim.fieldsByCode.get(dim.idField);
  if (search !== null && idField) {
    // The fields searchable under the metadata of this request, of the dimension's definition.
    const fields = searchableFields(dim.rules.dim);
    items.push({ kind: "search", dimension: dim.code, idField, fields, text: search });
  }
  const trecField = dim.fieldsByCode.get(TREC);
  const checked = filter ? checkFilterLimits(filter) : null;
  if (condTrec && trecField) {
    items.push({ kind: "condition", field: trecField, op: "in", value: [...condTrec] });
  } else if (trecField && !(checked && mentionsTrec(checked))) {
    items.push({ kind: "live" });
  }
  if (checked) {
    const planned = planExpr(dim.rules, checked);
    if (planned.kind === "and") items.push(...planned.items);
    else items.push(planned);
  }
  if (!items.length) return null;
  return items.length === 1 ? items[0]! : { kind: "and", items };
}

// ---------------------------------------------------------------- fields, sort, expand

function unique<T>(items: Iterable<T>): T[] {
  return [...new Set(items)];
}

/**
 * The fields a read returns: those with `flag` (or forced), narrowed to the requested ones (each
 * must be visible) and to a GraphQL selection's (invisible ones left out).
 */
function chooseColumns(
  rules: DimensionFields,
  flag: Flag,
  requested: readonly string[] | null,
  forced: readonly string[],
  selection?: ReadonlySet<string>,
): FieldDef[] {
  return only(requestedColumns(rules, flag, requested, forced), selection);
}

function requestedColumns(
  rules: DimensionFields,
  flag: Flag,
  requested: readonly string[] | null,
  forced: readonly string[],
): FieldDef[] {
  const { dim } = rules;
  if (requested === null && !forced.length) return [...rules.withFlag(flag)];
  const forcedFields = new Set(forced.map((name) => visibleFieldNamed(rules, name)));
  const allowed = (f: FieldDef) => forcedFields.has(f) || rules.allows(f, flag);
  if (requested === null) return dim.fields.filter(allowed);
  const wanted = new Set(requested.map((name) => visibleFieldNamed(rules, name)));
  // A forced field the field list leaves out would not be returned: the caller listed it and
  // would believe it applied (decisions.md, "A parameter that would have no effect").
  for (const name of forced) {
    if (!wanted.has(visibleFieldNamed(rules, name))) {
      const shown = name.slice(0, 60);
      throw invalidParameter(
        "forceListCost",
        `forceListCost names ${shown}, which the field list ($fields or $select; an export's fields) leaves out, so it would not be returned: list ${shown} there too, or leave the field list out.`,
      );
    }
  }
  return dim.fields.filter((f) => wanted.has(f) && allowed(f));
}

function planSort(rules: DimensionFields, sort: readonly SortSpec[], trusted: boolean): PlannedSort[] {
  const { dim } = rules;
  const out: PlannedSort[] = [];
  for (const s of sort) {
    const field = trusted ? visibleFieldNamed(rules, s.field) : searchableField(rules, s.field);
    if (!out.some((o) => o.field === field)) out.push({ field, direction: s.direction });
  }
  // Stable order: the id decides between equal keys.
  const id = dim.fieldsByCode.get(dim.idField)!;
  if (!out.some((o) => o.field === id)) out.push({ field: id, direction: "asc" });
  return out;
}

/** The caller's row scope on an authorized dimension (null: every row), for the proof's access. */
export function rowScopeOf(
  ctx: RequestContext,
  dim: AuthorizedDimension,
  access: Access = "read",
): PlannedFilter | null {
  const rule = dim.view.rowRule(dim, access);
  return rule.unrestricted ? null : rule.bind(scopeValuesOf(ctx));
}

/**
 * The caller's row scope on `target` read through `source` (a related read: $expand, relation
 * fields, documents): the grants covering that source decide it. The rule is the view's, kept per
 * dimension and source (AccessView.rowRuleThrough); a call binds it.
 */
export function relatedRowScope(
  ctx: RequestContext,
  model: MetadataModel,
  target: DimensionDef,
  source: string | null,
): PlannedFilter | null {
  const rule = accessView(ctx, model).rowRuleThrough(target, "read", source);
  return rule.unrestricted ? null : rule.bind({ ...scopeValuesOf(ctx), source });
}

/**
 * The relations `names` of `dim` as the caller may embed them: each with the target's fields it
 * may list, or of those only the ones `fieldsOf` names for it (GraphQL: the fields selected).
 */
export function planExpand(
  ctx: RequestContext,
  model: MetadataModel,
  dim: DimensionDef,
  names: readonly string[],
  fieldsOf?: ExpandFields,
): ExpandPlan[] {
  const view = accessView(ctx, model);
  const rules = view.fields(dim);
  const out: ExpandPlan[] = [];
  for (const name of unique(names)) {
    const named = dim.relationsByName.get(name);
    const target = named && model.dimensions.get(named.target);
    const parentKey = named && dim.fieldsByCode.get(named.parentKey);
    const targetKey = named && target?.fieldsByCode.get(named.targetKey);
    const keyKnown =
      named?.direction === "forward"
        ? parentKey && rules.isVisible(parentKey)
        : targetKey && target && view.fields(target).isVisible(targetKey);
    if (!named || !target || !parentKey || !targetKey || !keyKnown) {
      const names = [...dim.relations, ...dim.reverseRelations].map((r) => r.name).join(", ") || "none";
      throw invalidParameter(
        "$expand",
        `${name.slice(0, 60)} is not a relation of ${dim.code} (relations: ${names}).`,
      );
    }
    const source = view.sourceFor(target.code, "read");
    if (source === null) throw relatedNotReadable(ctx, target.code, name);
    out.push({
      name,
      direction: named.direction,
      relation: named.relation,
      target,
      parentKey,
      targetKey,
      columns: only(view.fields(target).withFlag("L"), fieldsOf?.get(name)),
      rowScope: relatedRowScope(ctx, model, target, source),
      limit: relationRowsPerParent(dim, name),
    });
  }
  return out;
}

/**
 * The most records relation `name` of `dim` embeds per parent ($expand, a GraphQL relation field
 * without `limit`): 1 forward, DEFAULT_RELATION_ROWS reverse; 0 for a name that is no relation.
 * What the read estimates count an expanded relation at.
 */
export function relationRowsPerParent(dim: DimensionDef, name: string): number {
  const named = dim.relationsByName.get(name);
  if (!named) return 0;
  return named.direction === "reverse" ? DEFAULT_RELATION_ROWS : 1;
}

/** `fields` narrowed to `codes` (a GraphQL selection's), in their order; all of them without. */
function only(fields: Iterable<FieldDef>, codes: ReadonlySet<string> | undefined): FieldDef[] {
  const all = [...fields];
  return codes ? all.filter((f) => codes.has(f.code)) : all;
}

function checkPaging(numRows: number, offset: number): void {
  if (!Number.isSafeInteger(numRows) || numRows < 0 || numRows > MAX_NUM_ROWS) {
    throw invalidParameter("$num_rows", `$num_rows must be a whole number from 0 to ${MAX_NUM_ROWS}.`);
  }
  if (!Number.isSafeInteger(offset) || offset < 0) {
    throw invalidParameter("$offset", "$offset must be a whole number of at least 0.");
  }
}

function selectedColumns(
  dim: DimensionDef,
  columns: readonly FieldDef[],
  sort: readonly PlannedSort[],
  expand: readonly ExpandPlan[],
): FieldDef[] {
  const id = dim.fieldsByCode.get(dim.idField)!;
  // The usual read (the id among the columns, sorted by columns, no relation key missing):
  // the columns themselves, which are in the dimension's field order already.
  if (
    columns.includes(id) &&
    sort.every((s) => columns.includes(s.field)) &&
    expand.every((e) => columns.includes(e.parentKey))
  )
    return [...columns];
  const need = new Set<FieldDef>(columns);
  need.add(id);
  for (const s of sort) need.add(s.field);
  for (const e of expand) need.add(e.parentKey);
  return dim.fields.filter((f) => need.has(f));
}

/**
 * A verified cursor's values as the keyset of `sort`: one per sort key (the id last), each cast by
 * its field's codec as a filter value is, null only where the field may be null. The cursor's
 * signature already binds it to this sort; a count or value that still does not fit is refused.
 */
function planKeyset(
  sort: readonly PlannedSort[],
  keyset: NonNullable<ListQuery["keyset"]>,
): NonNullable<RecordsPlan["keyset"]> {
  if (keyset.after === null) return { after: null };
  const values = keyset.after;
  if (values.length !== sort.length) throw invalidCursor("The cursor does not fit this list's sort.");
  const after = sort.map((s, i) => {
    const v: FilterLiteral | undefined = values[i];
    if (v === null || v === undefined) {
      if (v === null && s.field.nullable) return null;
      throw invalidCursor("The cursor does not fit this list's sort.");
    }
    try {
      return castScalar(s.field, v);
    } catch {
      throw invalidCursor("The cursor holds a value its sort field cannot have.");
    }
  });
  return { after };
}

/** A numeric value as PostgreSQL writes it (COUNT, SUM and AVG read as text: groupKeyAsText). */
const NUMERIC_TEXT = /^(-?\d{1,1000}(\.\d{1,16383})?|NaN)$/;

/**
 * A verified cursor's values as the keyset of a grouped result's `sort`: one per sort key, each
 * group field, MIN and MAX cast by its field's codec, COUNT, SUM and AVG kept as the numeric text
 * they were read as; any may be null (a group of NULLs, an aggregate of none). A result without
 * sort keys (no group fields) has one group at most, whose cursor holds `true` alone.
 */
function planGroupKeyset(
  sort: GroupsPlan["sort"],
  keyset: NonNullable<ListQuery["keyset"]>,
): NonNullable<GroupsPlan["keyset"]> {
  if (keyset.after === null) return { after: null };
  const values = keyset.after;
  const misfit = () => invalidCursor("The cursor does not fit this grouping's sort.");
  if (!sort.length) {
    if (values.length !== 1 || values[0] !== true) throw misfit();
    return { after: [] };
  }
  if (values.length !== sort.length) throw misfit();
  const after = sort.map(({ key }, i) => {
    const v: FilterLiteral | undefined = values[i];
    if (v === null) return null;
    if (v === undefined) throw misfit();
    if (groupKeyAsText(key)) {
      if (typeof v !== "string" || !NUMERIC_TEXT.test(v)) throw misfit();
      return v;
    }
    const field = key.kind === "field" ? key.field : key.aggregate.field;
    if (!field) throw misfit();
    try {
      return castScalar(field, v);
    } catch {
      throw invalidCursor("The cursor holds a value its sort field cannot have.");
    }
  });
  return { after };
}

/** An embedded relation replaces a field of the same name in the record. */
function withoutExpanded(columns: FieldDef[], expand: readonly ExpandPlan[]): FieldDef[] {
  const names = new Set(expand.map((e) => e.name));
  return columns.filter((f) => !names.has(f.code));
}

// ---------------------------------------------------------------- plans

export interface PlanOptions {
  /** Sort keys from TB_SORT (metadata, not the caller): R is not required. */
  trustedSort?: boolean;
}

export function planRecords(
  ctx: RequestContext,
  model: MetadataModel,
  dim: AuthorizedDimension<"read">,
  query: ListQuery,
  opts: PlanOptions = {},
): RecordsPlan {
  checkPaging(query.numRows, query.offset);
  const where = planWhere(dim, query.filter, query.condTrec, query.search);
  const sort = planSort(dim.rules, query.sort, opts.trustedSort === true);
  const expand = query.expand.length ? planExpand(ctx, model, dim, query.expand, query.expandFields) : [];
  const columns = withoutExpanded(
    chooseColumns(dim.rules, "L", query.fields, query.forceListCost, query.selectionFields),
    expand,
  );
  return {
    kind: "records",
    dim,
    tenantId: ctx.principal.tenantId,
    where,
    rowScope: rowScopeOf(ctx, dim),
    columns,
    selected: selectedColumns(dim, columns, sort, expand),
    sort,
    limit: query.numRows,
    offset: query.offset,
    expand,
    ...(query.keyset ? { keyset: planKeyset(sort, query.keyset) } : {}),
  };
}

/** A single record by id: fields with D. Null when the id cannot name a record of this dimension. */
export function planRecord(
  ctx: RequestContext,
  model: MetadataModel,
  dim: AuthorizedDimension<"read">,
  id: string | number,
  query: RecordQuery,
): RecordsPlan | null {
  const idField = dim.fieldsByCode.get(dim.idField)!;
  // An INTEGER id in a path is canonical decimal: /PO/01 and /PO/+1 name no record.
  if (dim.idType === "INTEGER" && typeof id === "string" && !CANONICAL_INTEGER.test(id)) return null;
  let idValue: unknown;
  try {
    idValue = castScalar(idField, id);
  } catch {
    return null;
  }
  const rule = planWhere(dim, null, query.condTrec);
  const byId: PlannedFilter = { kind: "condition", field: idField, op: "eq", value: idValue };
  const expand = query.expand.length ? planExpand(ctx, model, dim, query.expand, query.expandFields) : [];
  const columns = withoutExpanded(
    chooseColumns(dim.rules, "D", query.fields, [], query.selectionFields),
    expand,
  );
  return {
    kind: "records",
    dim,
    tenantId: ctx.principal.tenantId,
    where: rule ? { kind: "and", items: [byId, rule] } : byId,
    rowScope: rowScopeOf(ctx, dim),
    columns,
    selected: selectedColumns(dim, columns, [], expand),
    sort: [],
    limit: 1,
    offset: 0,
    expand,
  };
}

export function planCount(
  ctx: RequestContext,
  dim: AuthorizedDimension<"read">,
  query: ListQuery,
): PlanScope {
  return {
    dim,
    tenantId: ctx.principal.tenantId,
    where: planWhere(dim, query.filter, query.condTrec, query.search),
    rowScope: rowScopeOf(ctx, dim),
  };
}

const NUMERIC_ONLY = new Set(["SUM", "AVG"]);

function readableForGrouping(rules: DimensionFields, name: string): FieldDef {
  const field = searchableField(rules, name);
  if (!rules.allows(field, "L")) throw fieldNotReadable(name, rules.dim.code);
  return field;
}

export function planGroups(
  ctx: RequestContext,
  dim: AuthorizedDimension<"read">,
  query: ListQuery,
): GroupsPlan {
  checkPaging(query.numRows, query.offset);
  if (query.expand.length)
    throw invalidParameter("$expand", "$expand cannot be combined with $group or aggregate.");
  const groupBy = unique(query.groupBy.map((name) => readableForGrouping(dim.rules, name)));
  const requested: readonly AggregateSpec[] = query.aggregates.length
    ? query.aggregates
    : [{ fn: "COUNT", field: null, alias: "COUNT" }];
  const aggregates: PlannedAggregate[] = requested.map((a) => {
    const field = a.field === null ? null : readableForGrouping(dim.rules, a.field);
    if (field && NUMERIC_ONLY.has(a.fn) && field.dataType !== "INTEGER" && field.dataType !== "DECIMAL") {
      throw invalidParameter(
        "aggregate",
        `${a.fn} needs a number field; ${field.code} is ${field.dataType}.`,
      );
    }
    if (
      field &&
      (a.fn === "MIN" || a.fn === "MAX") &&
      ["BOOLEAN", "JSON", "MEDIA"].includes(field.dataType)
    ) {
      throw invalidParameter("aggregate", `${a.fn} does not apply to ${field.dataType} fields.`);
    }
    return { fn: a.fn, field, alias: a.alias };
  });
  const names = [...groupBy.map((f) => f.code), ...aggregates.map((a) => a.alias)];
  const duplicate = names.find((n, i) => names.indexOf(n) !== i);
  if (duplicate) throw invalidParameter("aggregate", `${duplicate} appears twice in the grouped result.`);

  const sort: Array<{ key: GroupSortKey; direction: "asc" | "desc" }> = [];
  for (const s of query.sort) {
    const field = groupBy.find((f) => f.code === s.field);
    const aggregate = aggregates.find((a) => a.alias === s.field);
    if (!field && !aggregate) {
      throw invalidParameter(
        "sort",
        `A grouped result sorts only by its groups or aggregates; ${s.field.slice(0, 60)} is neither.`,
      );
    }
    sort.push({
      key: field ? { kind: "field", field } : { kind: "aggregate", aggregate: aggregate! },
      direction: s.direction,
    });
  }
  for (const field of groupBy) {
    if (!sort.some((s) => s.key.kind === "field" && s.key.field === field))
      sort.push({ key: { kind: "field", field }, direction: "asc" });
  }
  return {
    kind: "groups",
    dim,
    tenantId: ctx.principal.tenantId,
    where: planWhere(dim, query.filter, query.condTrec, query.search),
    rowScope: rowScopeOf(ctx, dim),
    groupBy,
    aggregates,
    sort,
    limit: query.numRows,
    offset: query.offset,
    ...(query.keyset ? { keyset: planGroupKeyset(sort, query.keyset) } : {}),
  };
}

export function planList(
  ctx: RequestContext,
  model: MetadataModel,
  dim: AuthorizedDimension<"read">,
  query: ListQuery,
  opts: PlanOptions = {},
): ListPlan {
  return query.groupBy.length || query.aggregates.length
    ? planGroups(ctx, dim, query)
    : planRecords(ctx, model, dim, query, opts);
}
