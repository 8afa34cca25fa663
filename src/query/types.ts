// The read query model: what a list, count or detail request asks for, independent of the adapter
// (REST query string or GraphQL arguments) that built it. Field names are still plain strings here;
// src/query/plan.ts checks them against the metadata and the caller's rights.
import type { DimensionDef, FieldDef, PlanMode, Relation } from "../types.ts";

export const FILTER_OPERATORS = [
  "eq",
  "ne",
  "gt",
  "gte",
  "lt",
  "lte",
  "in",
  "nin",
  "like",
  "between",
  "startswith",
  "endswith",
  "contains",
] as const;
export type FilterOperator = (typeof FILTER_OPERATORS)[number];

/** A value as written in a request: typed literals from $filter or GraphQL, strings from filter[]. */
export type FilterLiteral = string | number | boolean | null;

export interface FilterCondition {
  readonly kind: "condition";
  readonly field: string;
  readonly op: FilterOperator;
  /** One literal; a list for in and nin, exactly two for between. */
  readonly value: FilterLiteral | readonly FilterLiteral[];
  /** Where the condition was written (`filter[NAME][$like]`, `$filter`), named in errors. */
  readonly origin: string;
}

export interface FilterGroup {
  readonly kind: "and" | "or";
  readonly items: readonly FilterExpr[];
}

export interface FilterNot {
  readonly kind: "not";
  readonly item: FilterExpr;
}

export type FilterExpr = FilterCondition | FilterGroup | FilterNot;

export type SortDirection = "asc" | "desc";

export interface SortSpec {
  readonly field: string;
  readonly direction: SortDirection;
}

export const AGGREGATE_FUNCTIONS = ["COUNT", "SUM", "AVG", "MIN", "MAX"] as const;
export type AggregateFunction = (typeof AGGREGATE_FUNCTIONS)[number];

export interface AggregateSpec {
  readonly fn: AggregateFunction;
  /** null: COUNT(*). */
  readonly field: string | null;
  /** Member name in the result rows: COUNT, or FN_FIELD (SUM_CREDIT_LIMIT). */
  readonly alias: string;
}

export const TREC_STATES = ["N", "M", "C", "P"] as const;
export type TrecState = (typeof TREC_STATES)[number];

/** Everything a list (or count) request can ask for. */
export interface ListQuery {
  readonly filter: FilterExpr | null;
  readonly sort: readonly SortSpec[];
  /** Page size, 0..1000 (default 100). */
  readonly numRows: number;
  readonly offset: number;
  /**
   * Requested fields ($fields / $select); null = every field the caller may list. Naming one the
   * caller may not see is an error.
   */
  readonly fields: readonly string[] | null;
  /**
   * GraphQL: the codes of the fields its selection reads. The columns are narrowed to those, and
   * one the caller may not see is left out without an error (its field resolver reports it).
   */
  readonly selectionFields?: ReadonlySet<string>;
  /** Relation names ($expand / include): forward relation names or child dimension codes. */
  readonly expand: readonly string[];
  readonly expandFields?: ExpandFields;
  /** TREC states included (cond_trec); null = the default (TREC <> 'C' unless TREC is filtered). */
  readonly condTrec: readonly TrecState[] | null;
  /** Fields returned in the list whatever their COD_ON_OFF (forceListCost). */
  readonly forceListCost: readonly string[];
  /** $group / groupBy: with aggregates, the result is one row per group. */
  readonly groupBy: readonly string[];
  readonly aggregates: readonly AggregateSpec[];
  /** Return the generated SQL and parameters (level 4 only). */
  readonly debug: boolean;
  /**
   * Count the matching records for meta.total (default true). Without it a page costs only its
   * own rows (has_more from one extra row): for GraphQL lists that do not select a total.
   */
  readonly withTotal: boolean;
  /** `$search` / `search:`: words matched against the dimension's full-text index (decisions §8). */
  readonly search: string | null;
  /**
   * `$count=exact`: count every matching record. Otherwise (decisions §11) the total is exact up to
   * the read context's count bound and the planner's estimate beyond it (`total_estimated`).
   */
  readonly exactCount: boolean;
  /**
   * GraphQL keyset paging (`first`/`after`, decisions §21): present when the client pages by
   * cursor. `after` holds the sort keys' values of the row the page follows (the id last), as the
   * verified cursor carried them, or null for the first page. The page then has no offset and
   * tells has_more from one extra row.
   */
  readonly keyset?: { readonly after: readonly FilterLiteral[] | null };
  /**
   * GraphQL: the page's end key (what `meta.end_cursor` encodes) is wanted on a page that is not a
   * cursor page too. A page of records always has it; a page of groups then reads its COUNT, SUM
   * and AVG sort keys as text as well (groupKeyAsText), exact where a JS number is not.
   */
  readonly endKey?: boolean;
}

/** What a single-record read can ask for. */
export interface RecordQuery {
  readonly fields: readonly string[] | null;
  /** As ListQuery's. */
  readonly selectionFields?: ReadonlySet<string>;
  readonly expand: readonly string[];
  readonly expandFields?: ExpandFields;
  readonly condTrec: readonly TrecState[] | null;
  readonly debug: boolean;
}

/**
 * For an expanded relation (by name), the codes of the target's fields to return (GraphQL: what
 * its selection reads); a relation not named returns every field the caller may list (REST's
 * $expand).
 */
export type ExpandFields = ReadonlyMap<string, ReadonlySet<string>>;

export const DEFAULT_NUM_ROWS = 100;
export const MAX_NUM_ROWS = 1000;
/**
 * The most records a to-many (reverse) relation embeds per parent (issue 35 §5): REST `$expand`
 * always, GraphQL without a `limit` argument. GraphQL's `limit` goes up to MAX_RELATION_ROWS.
 */
export const DEFAULT_RELATION_ROWS = DEFAULT_NUM_ROWS;
export const MAX_RELATION_ROWS = MAX_NUM_ROWS;
export const MAX_FILTER_DEPTH = 5;
export const MAX_FILTER_CONDITIONS = 20;
export const MAX_FILTER_LENGTH = 2000;

export function emptyListQuery(overrides: Partial<ListQuery> = {}): ListQuery {
  return {
    filter: null,
    sort: [],
    numRows: DEFAULT_NUM_ROWS,
    offset: 0,
    fields: null,
    expand: [],
    condTrec: null,
    forceListCost: [],
    groupBy: [],
    exactCount: false,
    aggregates: [],
    debug: false,
    withTotal: true,
    search: null,
    ...overrides,
  };
}

export function emptyRecordQuery(overrides: Partial<RecordQuery> = {}): RecordQuery {
  return { fields: null, expand: [], condTrec: null, debug: false, ...overrides };
}

// ---------------------------------------------------------------- plans (validated queries)

/** A condition checked against the metadata: the field resolved, the values cast to its type. */
export interface PlannedCondition {
  readonly kind: "condition";
  readonly field: FieldDef;
  readonly op: FilterOperator;
  /** SQL parameter(s); null only with eq / ne (IS NULL / IS NOT NULL). */
  readonly value: unknown;
  /** The value as the caller wrote it (a LIKE pattern's text before escaping), for echoes. */
  readonly literal?: unknown;
}

/** Full-text search: the record is in the search index of its dimension with these words. */
export interface PlannedSearch {
  readonly kind: "search";
  readonly dimension: string;
  readonly idField: FieldDef;
  /**
   * The dimension's searchable fields now (src/metadata/search-text.ts): the match is checked again on
   * the record's values of these, so an index row built when other fields were searchable never
   * matches on a word of a field hidden since.
   */
  readonly fields: readonly FieldDef[];
  readonly text: string;
}

/** The default lifecycle rule: TREC <> 'C'. */
export interface PlannedLiveOnly {
  readonly kind: "live";
}

/** Holds for no row (a row rule the caller's values cannot satisfy). */
export interface PlannedNone {
  readonly kind: "none";
}

export type PlannedFilter =
  | PlannedCondition
  | PlannedLiveOnly
  | PlannedSearch
  | PlannedNone
  | { readonly kind: "and" | "or"; readonly items: readonly PlannedFilter[] }
  | { readonly kind: "not"; readonly item: PlannedFilter };

export interface PlannedSort {
  readonly field: FieldDef;
  readonly direction: SortDirection;
}

/** One relation to embed in each record. */
export interface ExpandPlan {
  /** Member name in the record: the relation name (forward) or the child dimension's code (reverse). */
  readonly name: string;
  readonly direction: "forward" | "reverse";
  readonly relation: Relation;
  /** The dimension whose records are embedded. */
  readonly target: DimensionDef;
  /** The parent's column whose value is the key (forward: the foreign key; reverse: the referenced key). */
  readonly parentKey: FieldDef;
  /** The target's column matched against the key. */
  readonly targetKey: FieldDef;
  /** The target's fields returned (L for this caller). */
  readonly columns: readonly FieldDef[];
  /** The caller's row scope on the target (null: every row): an out-of-scope target is absent. */
  readonly rowScope: PlannedFilter | null;
  /**
   * The most target records embedded per parent, the first by the target's id: 1 for a forward
   * relation, DEFAULT_RELATION_ROWS for a reverse one.
   */
  readonly limit: number;
}

/** What a count counts: a dimension of a tenant (a count reads that table alone, for it). */
export interface CountScope {
  readonly tenantId: string;
  readonly dim: string;
}

/** Where a plan's rows come from and which rows: shared by every statement of a dimension. */
export interface PlanScope {
  readonly dim: DimensionDef;
  readonly tenantId: string;
  /** The request's conditions with the TREC rule, or null. */
  readonly where: PlannedFilter | null;
  /**
   * The caller's row scope (decisions.md §17: ROW_SCOPE and the grants' ROW_FILTER), or null for
   * every row. Kept apart from `where`: it is the caller's right, not the request's filter.
   */
  readonly rowScope: PlannedFilter | null;
}

export interface RecordsPlan extends PlanScope {
  readonly kind: "records";
  /** Fields returned, in NUM_VAR order. */
  readonly columns: readonly FieldDef[];
  /** Every column selected: the returned ones, the id, sort keys and expand keys. */
  readonly selected: readonly FieldDef[];
  readonly sort: readonly PlannedSort[];
  readonly limit: number;
  readonly offset: number;
  readonly expand: readonly ExpandPlan[];
  /**
   * Keyset paging: `after` holds one value per sort key (cast by its field's codec; null only for
   * a nullable field), or null for the first page. The page is the rows after it in the sort.
   */
  readonly keyset?: { readonly after: readonly unknown[] | null };
}

export interface PlannedAggregate {
  readonly fn: AggregateFunction;
  readonly field: FieldDef | null;
  readonly alias: string;
}

export type GroupSortKey =
  | { readonly kind: "field"; readonly field: FieldDef }
  | { readonly kind: "aggregate"; readonly aggregate: PlannedAggregate };

/**
 * Whether a grouped result's sort key is read as text for its keyset (decisions §21): COUNT, SUM
 * and AVG are numeric (AVG's many decimals, a large SUM) and a JS number would round them, so a
 * cursor holding the rounded value could skip the groups that tie with it. The group fields, MIN
 * and MAX have their field's type and are cast by its codec, as a list's sort keys are.
 */
export function groupKeyAsText(key: GroupSortKey): boolean {
  return key.kind === "aggregate" && key.aggregate.fn !== "MIN" && key.aggregate.fn !== "MAX";
}

export interface GroupsPlan extends PlanScope {
  readonly kind: "groups";
  readonly groupBy: readonly FieldDef[];
  readonly aggregates: readonly PlannedAggregate[];
  /** The groups' order: the sort asked for, then every group field not in it (ascending). */
  readonly sort: ReadonlyArray<{ readonly key: GroupSortKey; readonly direction: SortDirection }>;
  readonly limit: number;
  readonly offset: number;
  /**
   * Keyset paging (GraphQL `first`/`after` on `D_aggregate`): `after` holds one value per sort key
   * (every group field is one, so a group is named by its keys), or is empty for a result without
   * sort keys (one group at most: nothing follows it); null for the first page.
   */
  readonly keyset?: { readonly after: readonly unknown[] | null };
}

export type ListPlan = RecordsPlan | GroupsPlan;

/** Parameterised SQL: values only ever travel in `params`. */
export interface CompiledQuery {
  readonly text: string;
  readonly params: readonly unknown[];
  /**
   * "generic" when the statement's best plan is the same whatever its values (keyedPlan in
   * src/query/compile.ts): PostgreSQL then plans it once per connection (QueryOptions.plan).
   */
  readonly plan?: PlanMode;
}
