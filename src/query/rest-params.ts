// REST query string -> query model. Fastify's query parser gives flat keys ("filter[NAME][$like]")
// in a null-prototype object; the brackets are parsed here, and no user key is ever used to index
// a plain object.
import { BadRequestError } from "../errors.ts";
import { filterTooComplex, invalidFilter, invalidParameter } from "./errors.ts";
import { parseFilterExpression } from "./filter-parser.ts";
import { parseSortExpression } from "./sort-syntax.ts";
import {
  AGGREGATE_FUNCTIONS,
  type AggregateFunction,
  type AggregateSpec,
  DEFAULT_NUM_ROWS,
  emptyListQuery,
  emptyRecordQuery,
  FILTER_OPERATORS,
  type FilterCondition,
  type FilterExpr,
  type FilterOperator,
  type ListQuery,
  MAX_FILTER_LENGTH,
  MAX_NUM_ROWS,
  type RecordQuery,
  type SortSpec,
  TREC_STATES,
  type TrecState,
} from "./types.ts";

export type QueryParams = Readonly<Record<string, string | readonly string[] | undefined>>;

/** Parameters that carry request context, read by the auth layer, not by the query model. */
export const CONTEXT_PARAMETERS: ReadonlySet<string> = new Set([
  "source",
  "center_dett",
  "ambiente",
  "modulo",
  "microservice",
]);

/**
 * `_`: the cache-buster that jQuery's `cache: false` (and other browser clients) appends to a GET
 * as `_=<timestamp>`. Taken by every read and ignored: such clients send it on every call, and
 * refusing it would break them for a name that asks for nothing.
 */
export const CACHE_BUSTER = "_";

/** Whether `name` is a field of the request's dimension that the caller may know of. */
export type FieldNamed = (name: string) => boolean;

const NO_FIELD: FieldNamed = () => false;

const MAX_SEARCH_LENGTH = 200;

const LIST_PARAMETERS = new Set([
  "$search",
  "$count",
  "$num_rows",
  "$offset",
  "$fields",
  "$select",
  "$expand",
  "include",
  "sort",
  "$order",
  "$filter",
  "cond_trec",
  "forceListCost",
  "$group",
  "groupBy",
  "aggregate",
  "debug",
]);

const LOOKUP_PARAMETERS = new Set(["field", "$filter", "getACList", "$num_rows", "$offset"]);

const RECORD_PARAMETERS = new Set(["$fields", "$select", "$expand", "include", "cond_trec", "debug"]);

const FILTER_KEY = /^filter\[([^[\]]*)\](?:\[([^[\]]*)\])?$/;

function entries(params: QueryParams): Array<[string, string[]]> {
  const out: Array<[string, string[]]> = [];
  for (const key of Object.keys(params)) {
    const v = params[key];
    if (v === undefined) continue;
    out.push([key, typeof v === "string" ? [v] : [...v]]);
  }
  return out;
}

function single(name: string, values: string[]): string {
  if (values.length !== 1) throw invalidParameter(name, `${name} may be given only once.`);
  return values[0]!;
}

function list(value: string): string[] {
  return value
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");
}

function nonNegativeInteger(name: string, value: string, max: number): number {
  const trimmed = value.trim();
  const n = /^\d{1,16}$/.test(trimmed) ? Number(trimmed) : Number.NaN;
  if (!Number.isSafeInteger(n) || n > max) {
    throw invalidParameter(
      name,
      `${name} must be a whole number from 0 to ${max}; got '${value.slice(0, 40)}'.`,
    );
  }
  return n;
}

function booleanFlag(name: string, value: string): boolean {
  const v = value.trim().toLowerCase();
  if (v === "true" || v === "1" || v === "") return true;
  if (v === "false" || v === "0") return false;
  throw invalidParameter(name, `${name} must be true or false.`);
}

/** `sort`: the sort expression syntax (src/query/sort-syntax.ts). */
export const parseSortParam = parseSortExpression;

function parseOrderParam(value: string): SortSpec[] {
  return list(value).map((item) => {
    const m = /^(\S+)(?:\s+(asc|desc))?$/i.exec(item);
    if (!m)
      throw invalidParameter(
        "$order",
        `$order items are 'FIELD ASC' or 'FIELD DESC'; got '${item.slice(0, 40)}'.`,
      );
    return { field: m[1]!, direction: m[2]?.toLowerCase() === "desc" ? "desc" : "asc" };
  });
}

function parseCondTrec(value: string): TrecState[] {
  const states = list(value).map((s) => s.toUpperCase());
  for (const s of states) {
    if (!(TREC_STATES as readonly string[]).includes(s)) {
      throw invalidParameter(
        "cond_trec",
        `cond_trec lists TREC states among N, M, C, P; got '${s.slice(0, 20)}'.`,
      );
    }
  }
  if (!states.length) throw invalidParameter("cond_trec", "cond_trec lists at least one TREC state.");
  return [...new Set(states)] as TrecState[];
}

const AGGREGATE_ITEM = /^([A-Za-z]+)(?:\(\s*([^()\s]*)\s*\)|:(\S+))?$/;

/** `aggregate=COUNT,SUM(CREDIT_LIMIT),AVG:CREDIT_LIMIT`: COUNT alone or with * counts rows. */
export function parseAggregates(value: string): AggregateSpec[] {
  return list(value).map((item) => {
    const m = AGGREGATE_ITEM.exec(item);
    const fn = m?.[1]?.toUpperCase();
    if (!m || !fn || !(AGGREGATE_FUNCTIONS as readonly string[]).includes(fn)) {
      throw invalidParameter(
        "aggregate",
        `aggregate items are COUNT, COUNT(FIELD), SUM(FIELD), AVG(FIELD), MIN(FIELD) or MAX(FIELD); got '${item.slice(0, 40)}'.`,
      );
    }
    const arg = m[2] ?? m[3] ?? "";
    const field = arg === "" || arg === "*" ? null : arg;
    if (field === null && fn !== "COUNT")
      throw invalidParameter("aggregate", `${fn} needs a field: ${fn}(FIELD).`);
    return { fn: fn as AggregateFunction, field, alias: field === null ? fn : `${fn}_${field}` };
  });
}

function parseOperator(key: string, raw: string | undefined): FilterOperator {
  if (raw === undefined) return "eq";
  const name = raw.startsWith("$") ? raw.slice(1) : raw;
  const op = FILTER_OPERATORS.find((o) => o === name.toLowerCase());
  if (!op || op === "startswith" || op === "endswith" || op === "contains") {
    throw invalidFilter(
      `Unknown filter operator '${raw.slice(0, 30)}' in ${key.slice(0, 80)}; use $eq, $ne, $gt, $gte, $lt, $lte, $in, $nin, $like or $between.`,
      key.slice(0, 120),
      { token: raw.slice(0, 30) },
    );
  }
  return op;
}

function filterCondition(key: string, field: string, op: FilterOperator, value: string): FilterCondition {
  if (op === "in" || op === "nin")
    return { kind: "condition", field, op, value: value.split(","), origin: key };
  if (op === "between") {
    const bounds = value.split(",");
    if (bounds.length !== 2) {
      throw invalidFilter(`${key} takes two comma-separated values.`, key, { token: value.slice(0, 30) });
    }
    return { kind: "condition", field, op, value: bounds, origin: key };
  }
  return { kind: "condition", field, op, value, origin: key };
}

/** The filter[...] parameters as conditions (combined with AND). */
export function parseFilterParams(params: QueryParams): FilterCondition[] {
  const out: FilterCondition[] = [];
  let length = 0;
  for (const [key, values] of entries(params)) {
    if (!key.startsWith("filter")) continue;
    const m = FILTER_KEY.exec(key);
    if (!m || m[1] === "") {
      throw invalidFilter(
        `Invalid filter parameter '${key.slice(0, 80)}': use filter[FIELD]=value or filter[FIELD][$op]=value.`,
        key.slice(0, 120),
        { token: key.slice(0, 80) },
      );
    }
    const op = parseOperator(key, m[2]);
    for (const value of values) {
      length += key.length + value.length;
      out.push(filterCondition(key, m[1]!, op, value));
    }
  }
  if (length > MAX_FILTER_LENGTH) {
    throw filterTooComplex(`The filter parameters are longer than ${MAX_FILTER_LENGTH} characters.`, {
      max_length: MAX_FILTER_LENGTH,
      length,
    });
  }
  return out;
}

function combinedFilter(params: QueryParams, expression: string | undefined): FilterExpr | null {
  const items: FilterExpr[] = parseFilterParams(params);
  if (expression !== undefined && expression.trim() !== "") items.push(parseFilterExpression(expression));
  if (!items.length) return null;
  return items.length === 1 ? items[0]! : { kind: "and", items };
}

/**
 * `sort[]=NAME`, `include[0]=CITY`, `$fields[]=NAME`: a bracketed form of a parameter that takes
 * one string. Such a key is no parameter of ours: refused, naming the form it takes (before the
 * refusal of unknown names, which would not say it).
 */
function checkBracketForm(key: string): void {
  const base = /^([^[\]]+)\[/.exec(key)?.[1];
  if (base === undefined || base === "filter") return;
  if (!LIST_PARAMETERS.has(base) && !CONTEXT_PARAMETERS.has(base) && !LOOKUP_PARAMETERS.has(base)) return;
  const name = key.slice(0, 60);
  throw invalidParameter(
    name,
    `${name} is not a form of ${base}: give ${base} once, as one string (several items separated by commas, e.g. ${base}=A,B).`,
  );
}

function checkUnknown(params: QueryParams, known: ReadonlySet<string>): void {
  for (const key of Object.keys(params)) {
    checkBracketForm(key);
    if (key.startsWith("$") && !known.has(key)) {
      throw invalidParameter(key.slice(0, 60), `Unknown query parameter ${key.slice(0, 60)}.`);
    }
  }
}

/**
 * Refuses a plain name that no parameter of the request has (400 INVALID_PARAMETER naming it): it
 * was left unread, so that `?CITY=Rome`, meant as a filter, answered the whole list. The filter
 * keys, `$` names and bracketed forms have their own checks (parseFilterParams, checkUnknown);
 * the context parameters and the cache-buster `_` are taken everywhere. When the name is a field
 * of the dimension (`isField`: one the caller may know of), the message gives the filter's form.
 */
export function refuseUnknownNames(
  params: QueryParams,
  takes: ReadonlySet<string>,
  isField: FieldNamed = NO_FIELD,
): void {
  for (const key of Object.keys(params)) {
    if (takes.has(key) || CONTEXT_PARAMETERS.has(key) || key === CACHE_BUSTER || key.startsWith("filter"))
      continue;
    const name = key.slice(0, 60);
    const hint = isField(key)
      ? ` ${name} is a field: to filter on it, write filter[${name}]=value (or $filter=${name} eq 'value').`
      : "";
    throw invalidParameter(
      name,
      `Unknown query parameter ${name}: no parameter of this request has that name.${hint}`,
    );
  }
}

/**
 * The list (and count) parameters of spec 4.2. An unknown name is refused (400 INVALID_PARAMETER),
 * with the filter's form when it names a field (`isField`).
 */
export function parseListParams(params: QueryParams, isField: FieldNamed = NO_FIELD): ListQuery {
  checkUnknown(params, LIST_PARAMETERS);
  refuseUnknownNames(params, LIST_PARAMETERS, isField);
  let numRows = DEFAULT_NUM_ROWS;
  let offset = 0;
  let fields: string[] | null = null;
  const expand: string[] = [];
  const sort: SortSpec[] = [];
  let expression: string | undefined;
  let condTrec: TrecState[] | null = null;
  const forceListCost: string[] = [];
  const groupBy: string[] = [];
  let aggregates: AggregateSpec[] = [];
  let debug = false;
  let withTotal = true;
  let exactCount = false;
  let search: string | null = null;
  /** The parameters given that choose columns (`$fields`, `$select`, `forceListCost`). */
  const columnParameters: string[] = [];

  if (params.sort !== undefined && params.$order !== undefined) {
    throw invalidParameter(
      "$order",
      "Give the order once: sort or $order, not both (they are two spellings of one parameter).",
    );
  }

  for (const [key, values] of entries(params)) {
    if (CONTEXT_PARAMETERS.has(key) || key.startsWith("filter")) continue;
    switch (key) {
      case "$num_rows":
        numRows = nonNegativeInteger(key, single(key, values), MAX_NUM_ROWS);
        break;
      case "$offset":
        offset = nonNegativeInteger(key, single(key, values), Number.MAX_SAFE_INTEGER);
        break;
      case "$fields":
      case "$select": {
        columnParameters.push(key);
        const v = list(single(key, values));
        // An empty list (`$fields=`) asks for nothing in particular: every field, like `*`.
        if (v.length === 0 || v.includes("*")) fields = null;
        else fields = [...(fields ?? []), ...v];
        break;
      }
      case "$expand":
      case "include":
        for (const v of values) expand.push(...list(v));
        break;
      case "sort":
        sort.unshift(...parseSortParam(single(key, values)));
        break;
      case "$order":
        sort.push(...parseOrderParam(single(key, values)));
        break;
      case "$filter":
        expression = single(key, values);
        break;
      case "cond_trec":
        condTrec = parseCondTrec(single(key, values));
        break;
      case "forceListCost":
        columnParameters.push(key);
        for (const v of values) forceListCost.push(...list(v));
        break;
      case "$group":
      case "groupBy":
        for (const v of values) groupBy.push(...list(v));
        break;
      case "aggregate":
        aggregates = [...aggregates, ...values.flatMap(parseAggregates)];
        break;
      case "debug":
        debug = booleanFlag(key, single(key, values));
        break;
      case "$search": {
        const text = single(key, values).trim();
        if (text.length === 0 || text.length > MAX_SEARCH_LENGTH)
          throw invalidParameter(key, `$search takes 1 to ${MAX_SEARCH_LENGTH} characters of words.`);
        search = text;
        break;
      }
      case "$count": {
        const mode = single(key, values).trim().toLowerCase();
        if (mode !== "exact" && mode !== "none" && mode !== "auto")
          throw invalidParameter(key, "$count is exact, none or auto (the default).");
        withTotal = mode !== "none";
        exactCount = mode === "exact";
        break;
      }
      default:
        break;
    }
  }
  // A grouped result's columns are its groups and aggregates: `$fields` would be left unread
  // (as `$expand` is refused by the planner).
  if (columnParameters.length && (groupBy.length || aggregates.length)) {
    const name = columnParameters[0]!;
    throw invalidParameter(
      name,
      `${name} cannot be combined with $group, groupBy or aggregate: a grouped result's columns are its groups and aggregates.`,
    );
  }
  return emptyListQuery({
    filter: combinedFilter(params, expression),
    sort,
    numRows,
    offset,
    fields,
    expand,
    condTrec,
    forceListCost,
    groupBy,
    aggregates,
    debug,
    withTotal,
    exactCount,
    search,
  });
}

/**
 * Refuses the read parameters (a list's or a record's: `filter[…]`, `$filter`, `sort`, paging,
 * `$fields`, `$expand`, grouping…) that a request does not take, those in `takes` excepted, and
 * any unknown `$` name or bracketed form: each would be left unread, the caller believing it
 * applied. 400 INVALID_PARAMETER naming the parameter as sent, with `because(name)` as the message
 * (`name` is `filter[…]` for any filter). The detail read and the single-record writes use it.
 */
export function refuseReadParameters(
  params: QueryParams,
  takes: ReadonlySet<string>,
  because: (name: string) => string,
): void {
  for (const key of Object.keys(params)) {
    checkBracketForm(key);
    const read = key.startsWith("filter") ? "filter[…]" : LIST_PARAMETERS.has(key) ? key : null;
    if (read !== null && !takes.has(key)) throw invalidParameter(key.slice(0, 60), because(read));
  }
  checkUnknown(params, takes);
}

/**
 * The single-record parameters: $fields/$select, $expand/include, cond_trec, debug. A list
 * parameter (`filter[…]`, `$filter`, `sort`, paging, grouping…) names no record and would be left
 * unread: refused.
 */
export function parseRecordParams(params: QueryParams): RecordQuery {
  refuseReadParameters(
    params,
    RECORD_PARAMETERS,
    (name) =>
      `${name} applies to lists; a single record is read by its id and takes only $fields, $select, $expand, include, cond_trec and debug (cond_trec=C reads a cancelled one).`,
  );
  // A record is named by its id: a field's name here filters nothing, and no filter applies.
  refuseUnknownNames(params, RECORD_PARAMETERS, NO_FIELD);
  const q = parseListParams(
    Object.fromEntries(
      entries(params).filter(([k]) => RECORD_PARAMETERS.has(k) || CONTEXT_PARAMETERS.has(k)),
    ),
  );
  return emptyRecordQuery({ fields: q.fields, expand: q.expand, condTrec: q.condTrec, debug: q.debug });
}

/**
 * GET /{dim}/sort/{sort_key}: every list parameter but the order, which the named sort gives
 * (spec decisions §2, TB_SORT: "takes every list parameter but `sort`"; `$order` is its other
 * spelling).
 */
export function parseNamedSortParams(params: QueryParams, isField: FieldNamed = NO_FIELD): ListQuery {
  for (const name of ["sort", "$order"]) {
    if (params[name] !== undefined) {
      throw invalidParameter(
        name,
        `${name} is not taken on /{dim}/sort/{sort_key}: the named sort orders the list. List with GET /{dim}?sort=… for another order.`,
      );
    }
  }
  return parseListParams(params, isField);
}

/** What GET /{dim}/count reads: the list's filters (spec 4.2: "count with the list filters"). */
const COUNT_PARAMETERS = new Set(["$filter", "$search", "cond_trec", "debug"]);

/**
 * GET /{dim}/count: the list's filters (`filter[…]`, `$filter`, `$search`, `cond_trec`) and
 * `debug`. A list parameter that shapes rows (order, paging, fields, expansion, grouping) changes
 * no count and would be left unread: refused.
 */
export function parseCountParams(params: QueryParams, isField: FieldNamed = NO_FIELD): ListQuery {
  for (const key of Object.keys(params)) {
    if (LIST_PARAMETERS.has(key) && !COUNT_PARAMETERS.has(key)) {
      throw invalidParameter(
        key.slice(0, 60),
        `${key} does not apply to a count, which takes only the list's filters (filter[…], $filter, $search, cond_trec) and debug.`,
      );
    }
  }
  return parseListParams(params, isField);
}

/**
 * `getACList`: 1 or true asks the whole list, 0 or false does not (as if absent). Anything else,
 * the empty value included, is refused: read as false, it answered an empty list that looked like
 * "no values" (like `force` on a delete, only an explicit value counts).
 */
function lookupFlag(value: string): boolean {
  const v = value.toLowerCase();
  if (v === "1" || v === "true") return true;
  if (v === "0" || v === "false") return false;
  throw invalidParameter(
    "getACList",
    `getACList is 1 (or true) for the whole list, or 0 (or false); got '${value.slice(0, 40)}'.`,
  );
}

/**
 * GET /vars: `field` (required), `$filter`, `getACList=1`, and the page: `$num_rows` (default and
 * at most MAX_NUM_ROWS, the lookup's bound) and `$offset`, read as a list's.
 */
export function parseLookupParams(params: QueryParams): {
  field: string;
  filter: FilterExpr | null;
  fullList: boolean;
  limit: number;
  offset: number;
} {
  checkUnknown(params, LOOKUP_PARAMETERS);
  // A list's parameters name nothing here, and would be left unread (the whole list answered).
  for (const key of Object.keys(params)) {
    if (LOOKUP_PARAMETERS.has(key) || !(key.startsWith("filter") || LIST_PARAMETERS.has(key))) continue;
    const name = key.slice(0, 60);
    throw invalidParameter(
      name,
      `${name} is not taken by a lookup, which takes field, $filter (an expression on the key and display fields, e.g. $filter=NAME eq 'Rossi'), getACList, $num_rows and $offset.`,
    );
  }
  refuseUnknownNames(params, LOOKUP_PARAMETERS, NO_FIELD);
  const given = new Map(entries(params));
  const one = (name: string) => {
    const values = given.get(name);
    return values === undefined ? "" : single(name, values).trim();
  };
  const field = one("field");
  if (!field) {
    throw new BadRequestError("MISSING_PARAMETER", "The query parameter field is required.", {
      field: "field",
    });
  }
  const expression = one("$filter");
  const numRows = one("$num_rows");
  const offset = one("$offset");
  return {
    field,
    filter: expression ? parseFilterExpression(expression) : null,
    fullList: given.has("getACList") && lookupFlag(one("getACList")),
    limit: given.has("$num_rows") ? nonNegativeInteger("$num_rows", numRows, MAX_NUM_ROWS) : MAX_NUM_ROWS,
    offset: given.has("$offset") ? nonNegativeInteger("$offset", offset, Number.MAX_SAFE_INTEGER) : 0,
  };
}

const HISTORY_PARAMETERS = new Set(["$num_rows", "$offset"]);

/**
 * GET /{dim}/{id}/history: `$num_rows` (default 100, at most 1000) and `$offset`, besides the
 * context parameters. Anything else (`filter[…]`, `sort`, `$fields`, `cond_trec`, a name of no
 * endpoint) would be left unread, so that the caller believed it applied: refused, naming it and
 * what the history takes (its revisions come newest first, every field the caller may read).
 */
export function parseHistoryParams(params: QueryParams): { limit: number; offset: number } {
  for (const key of Object.keys(params)) {
    if (HISTORY_PARAMETERS.has(key) || CONTEXT_PARAMETERS.has(key)) continue;
    const name = key.slice(0, 60);
    throw invalidParameter(
      name,
      `${name} is not taken by a record's history, which takes only $num_rows and $offset (besides source and the context parameters center_dett, ambiente, modulo, microservice): it lists every revision, newest first.`,
    );
  }
  let limit = DEFAULT_NUM_ROWS;
  let offset = 0;
  for (const [key, values] of entries(params)) {
    if (key === "$num_rows") limit = nonNegativeInteger(key, single(key, values), MAX_NUM_ROWS);
    if (key === "$offset") offset = nonNegativeInteger(key, single(key, values), Number.MAX_SAFE_INTEGER);
  }
  return { limit, offset };
}
