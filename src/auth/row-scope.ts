// Row scope (spec 5.8 layer 4, decisions.md §17): which rows of a dimension a caller may see and
// write. Two sources, both from metadata and grants, never from the request:
// - TB_DIM.ROW_SCOPE: the row's scope columns must equal the caller's session values (centro_dett,
//   ambiente, the user), unless the grant holds the operation `all_rows`;
// - a grant's ROW_FILTER: a $filter expression over the dimension's fields in which {user},
//   {tenant}, {centro_dett}, {ambiente} and {source} stand for the caller's values.
// Each grant covering the source with the needed operation lets through the rows matching both of
// its parts; the caller sees the union over those grants. The rule is worked out once per access
// view and dimension (the filter parsed once), then bound to a caller's values; a bound predicate
// is kept per distinct values, so a request pays a map lookup.
import { menuSubtree } from "../metadata/build.ts";
import { parseFilterExpression } from "../query/filter-parser.ts";
import { planFilterExpr } from "../query/plan.ts";
import type { FilterCondition, FilterExpr, FilterLiteral, PlannedFilter } from "../query/types.ts";
import type { DimensionDef, Grant, MetadataModel, Operation, RequestContext } from "../types.ts";

/** The caller's values the scope compares with: the session's, never the request's. */
export interface ScopeValues {
  readonly user: string;
  readonly tenant: string;
  readonly centro_dett: string | null;
  readonly ambiente: string | null;
  readonly source: string | null;
}

export const SCOPE_PLACEHOLDERS = ["user", "tenant", "centro_dett", "ambiente", "source"] as const;

export function scopeValuesOf(ctx: RequestContext): ScopeValues {
  const p = ctx.principal;
  return {
    user: p.userId,
    tenant: p.tenantId,
    centro_dett: p.centroDett,
    ambiente: p.ambiente,
    source: ctx.source ?? null,
  };
}

/** One dimension's row rule for one view and access: bound to a caller's values on each read. */
export interface RowRule {
  /** True when every row is let through (no scope, an `all_rows` grant, no filter applying). */
  readonly unrestricted: boolean;
  /** The predicate rows must match for these values; null when unrestricted. */
  bind(values: ScopeValues): PlannedFilter | null;
}

const UNRESTRICTED: RowRule = { unrestricted: true, bind: () => null };

/** What matches no row: a cast that cannot hold the caller's value, a stored filter that no longer parses. */
export const NO_ROWS: PlannedFilter = { kind: "none" };

/** The field codes a filter names. */
export function filterFields(expr: FilterExpr, into = new Set<string>()): Set<string> {
  if (expr.kind === "condition") into.add(expr.field);
  else if (expr.kind === "not") filterFields(expr.item, into);
  else for (const item of expr.items) filterFields(item, into);
  return into;
}

/** Parsed ROW_FILTER texts (the same text parses to the same tree; bounded by the grants in use). */
const PARSE_FAILED = Symbol("parse failed");
type Parsed = FilterExpr | typeof PARSE_FAILED;

function parseRowFilter(text: string, parsed: Map<string, Parsed>): Parsed {
  let found = parsed.get(text);
  if (found === undefined) {
    try {
      found = parseFilterExpression(text);
    } catch {
      found = PARSE_FAILED;
    }
    parsed.set(text, found);
  }
  return found;
}

/** One grant's part: the scope keys it keeps and the filter it adds (null: none). */
interface GrantPart {
  readonly scoped: boolean;
  readonly filter: Parsed | null;
}

function grantPart(dim: DimensionDef, grant: Grant, parsed: Map<string, Parsed>): GrantPart {
  const scoped = dim.rowScope.length > 0 && !grant.OPERATIONS.includes("all_rows");
  let filter: Parsed | null = null;
  if (grant.ROW_FILTER) {
    const expr = parseRowFilter(grant.ROW_FILTER, parsed);
    // A filter applies to the dimensions that have every field it names (checked when written).
    if (expr === PARSE_FAILED) filter = PARSE_FAILED;
    else if ([...filterFields(expr)].every((f) => dim.fieldsByCode.has(f))) filter = expr;
  }
  return { scoped, filter };
}

const PLACEHOLDER = /\{(user|tenant|centro_dett|ambiente|source)\}/g;

/** A literal with the caller's values in place of its placeholders; `{x}` alone keeps a null. */
function substitute(value: FilterLiteral, values: ScopeValues): FilterLiteral {
  if (typeof value !== "string" || !value.includes("{")) return value;
  const whole = /^\{(user|tenant|centro_dett|ambiente|source)\}$/.exec(value);
  if (whole) return values[whole[1] as keyof ScopeValues];
  return value.replace(PLACEHOLDER, (_, key: keyof ScopeValues) => values[key] ?? "");
}

function bindExpr(expr: FilterExpr, values: ScopeValues): FilterExpr {
  switch (expr.kind) {
    case "condition": {
      const value = Array.isArray(expr.value)
        ? (expr.value as readonly FilterLiteral[]).map((v) => substitute(v, values))
        : substitute(expr.value as FilterLiteral, values);
      return { ...expr, value };
    }
    case "not":
      return { kind: "not", item: bindExpr(expr.item, values) };
    default:
      return { kind: expr.kind, items: expr.items.map((item) => bindExpr(item, values)) };
  }
}

/** The scope keys' conditions: each column equal to the caller's value (IS NULL for none). */
function scopeConditions(dim: DimensionDef, values: ScopeValues): PlannedFilter[] {
  return dim.rowScope.map((k) => ({
    kind: "condition" as const,
    field: dim.fieldsByCode.get(k.column)!,
    op: "eq" as const,
    value: k.key === "owner" ? values.user : values[k.key],
  }));
}

function planPart(dim: DimensionDef, part: GrantPart, values: ScopeValues): PlannedFilter {
  const items: PlannedFilter[] = part.scoped ? scopeConditions(dim, values) : [];
  if (part.filter === PARSE_FAILED) return NO_ROWS;
  if (part.filter) {
    try {
      items.push(
        planFilterExpr(bindExpr(part.filter, values), { field: (c) => dim.fieldsByCode.get(c.field)! }),
      );
    } catch {
      // The caller's value cannot be compared with the field (a user id against a number): the
      // condition holds for no row, which is what comparing unequal types means.
      return NO_ROWS;
    }
  }
  return items.length === 1 ? items[0]! : { kind: "and", items };
}

/** Bound predicates kept per rule (distinct callers' values); cleared when full. */
const MAX_BOUND = 256;

/**
 * The row rule of `dim` for the grants that cover the source and hold `operation`. Null grants
 * list: none covers (the access check refuses first; nothing is let through meanwhile).
 */
export function rowRule(
  dim: DimensionDef,
  grants: readonly Grant[],
  operation: Operation,
  parsed: Map<string, Parsed>,
): RowRule {
  const holding = grants.filter((g) => g.OPERATIONS.includes(operation));
  if (!dim.rowScope.length && !holding.some((g) => g.ROW_FILTER)) return UNRESTRICTED;
  const parts: GrantPart[] = [];
  for (const g of holding) {
    const part = grantPart(dim, g, parsed);
    if (!part.scoped && part.filter === null) return UNRESTRICTED;
    if (!parts.some((p) => p.scoped === part.scoped && p.filter === part.filter)) parts.push(part);
  }
  if (!parts.length) return { unrestricted: false, bind: () => NO_ROWS };
  const bound = new Map<string, PlannedFilter>();
  return {
    unrestricted: false,
    bind(values) {
      const key = `${values.user}\u0000${values.tenant}\u0000${values.centro_dett ?? "\u0001"}\u0000${values.ambiente ?? "\u0001"}\u0000${values.source ?? ""}`;
      let found = bound.get(key);
      if (!found) {
        const planned = parts.map((p) => planPart(dim, p, values));
        found = planned.length === 1 ? planned[0]! : { kind: "or", items: planned };
        if (bound.size >= MAX_BOUND) bound.clear();
        bound.set(key, found);
      }
      return found;
    },
  };
}

export type ParsedFilters = Map<string, Parsed>;

/**
 * Why a grant's ROW_FILTER cannot be stored (null: it can): it does not parse, or no dimension
 * under the grant's node has every field it names (decisions.md §17, refused when written).
 */
export function rowFilterProblem(model: MetadataModel, codMenu: string, text: string): string | null {
  let expr: FilterExpr;
  try {
    expr = parseFilterExpression(text);
  } catch (e) {
    return `ROW_FILTER does not parse: ${(e as Error).message}`;
  }
  const names = [...filterFields(expr)];
  // The dimensions the node serves (sourceServes): those of the nodes below it, and those no node
  // serves at all.
  const dims = new Set<string>();
  for (const node of menuSubtree(model, codMenu)) if (node.dim) dims.add(node.dim);
  const served = new Set(model.menu.map((m) => m.dim).filter((d) => d !== null));
  if (!model.menuByCode.get(codMenu)?.dim)
    for (const d of model.dimensions.keys()) if (!served.has(d)) dims.add(d);
  const applying = [...dims].filter((code) =>
    names.every((n) => model.dimensions.get(code)?.fieldsByCode.has(n)),
  );
  if (!applying.length)
    return `ROW_FILTER names ${names.join(", ")}; no dimension under ${codMenu} has ${names.length === 1 ? "it" : "them all"}`;
  for (const code of applying) {
    const problem = castProblem(model.dimensions.get(code)!, codMenu, expr);
    if (problem) return problem;
  }
  return null;
}

const HAS_PLACEHOLDER = /\{(user|tenant|centro_dett|ambiente|source)\}/;

/** The conditions of a filter, in the order written. */
function conditionsOf(expr: FilterExpr): FilterCondition[] {
  if (expr.kind === "condition") return [expr];
  if (expr.kind === "not") return conditionsOf(expr.item);
  return expr.items.flatMap(conditionsOf);
}

/**
 * Why a condition of the filter could never hold on `dim`: its value cannot be read as the
 * field's type (or its operator does not apply to it), which at request time would silently
 * match no rows. Values with a placeholder are the caller's and judged per request.
 */
function castProblem(dim: DimensionDef, codMenu: string, expr: FilterExpr): string | null {
  for (const c of conditionsOf(expr)) {
    const values = (Array.isArray(c.value) ? c.value : [c.value]) as readonly FilterLiteral[];
    if (values.some((v) => typeof v === "string" && HAS_PLACEHOLDER.test(v))) continue;
    const field = dim.fieldsByCode.get(c.field)!;
    try {
      planFilterExpr(c, { field: () => field });
    } catch (e) {
      const value = JSON.stringify(c.value);
      return `ROW_FILTER of the grant on ${codMenu}: ${c.field} is a ${field.dataType} field of ${dim.code}, and ${value} cannot be compared with it by ${c.op} (${(e as Error).message}). As written the filter would match no rows; give a ${field.dataType} value.`;
    }
  }
  return null;
}
