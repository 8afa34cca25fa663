// GraphQL fields → the same read and write resolvers as REST. Arguments become the typed query
// model (where → FilterExpr, order_by → SortSpec); what is selected decides what is loaded
// (relations through the request's DataLoaders, `total` only when asked for). Nothing here decides
// access: the resolvers do, with the REST errors.
import DataLoader from "dataloader";
import { GraphQLError, type GraphQLResolveInfo, Kind } from "graphql";
import { ApiError, NotFoundError } from "../errors.ts";
import { invalidParameter } from "../query/errors.ts";
import { parseFilterExpression } from "../query/filter-parser.ts";
import { planExpand } from "../query/plan.ts";
import { parseSortExpression } from "../query/sort-syntax.ts";
import {
  type AggregateSpec,
  DEFAULT_NUM_ROWS,
  type ExpandFields,
  type ExpandPlan,
  emptyListQuery,
  type FilterExpr,
  type FilterLiteral,
  type FilterOperator,
  type ListQuery,
  MAX_NUM_ROWS,
  type SortSpec,
  TREC_STATES,
  type TrecState,
} from "../query/types.ts";
import {
  attachRelationTree,
  countRecords,
  createReadContext,
  type EmbeddedRelation,
  getRecord,
  listRecords,
  listRelatedPages,
  loadPlannedRelation,
  type ReadContext,
  type RelationTree,
  lookupValues,
  MAX_LOOKUP_ITEMS,
  subscribeToEvents,
} from "../resolvers/read/index.ts";
import { getDocument } from "../resolvers/read/documents.ts";
import type { DataRecord } from "../resolvers/read/common.ts";
import { batchCreate } from "../resolvers/write/batch.ts";
import { runCommand } from "../resolvers/write/commands.ts";
import { restoreRevision } from "../resolvers/write/restore.ts";
import { listHistory } from "../resolvers/read/history.ts";
import type { RequestBudget } from "../resolvers/write/context.ts";
import { runCoreBatch } from "../resolvers/write/core-batch.ts";
import { createOne, deleteOne, updateOne } from "../resolvers/write/operations.ts";
import { presentCascaded } from "../resolvers/write/present.ts";
import type { SchemaResolvers } from "../schema/build.ts";
import type { Services } from "../services.ts";
import { type Caller, type Config, type DimensionDef, inScope, type RequestContext } from "../types.ts";
import { loadSigningSecret } from "../auth/keys.ts";
import { type CursorCodec, type CursorScope, cursorCodec } from "./cursor.ts";
import { plain } from "./input-values.ts";
import { deepFreeze } from "../deep-freeze.ts";
import { createLookahead, type SelectedField, under } from "./lookahead.ts";

/** One GraphQL request: the caller (authenticated once, source-less) and the services. */
export interface GraphQLContext {
  caller: Caller;
  /** What one request's resolvers share besides the maps below (stateOf; absent until needed). */
  resolverState?: RequestState;
  services: Pick<
    Services,
    "db" | "readDb" | "metadata" | "config" | "feed" | "commands" | "totals" | "creates"
  >;
  /**
   * Read contexts per (source, center_dett), so that one operation shares its loaders (made by the
   * first field that reads: a subscription, which holds its context while it lives, has none).
   */
  readContexts?: Map<string, ReadContext>;
  /** Loaders of reverse relations with their own arguments, per relation, context and arguments. */
  pageLoaders?: Map<string, DataLoader<string | number, DataRecord[], string>>;
  /** The operation's write bounds, spent by every mutation field together (issue 18). */
  writeBudget: RequestBudget;
  /**
   * Told each time a relation is planned for a nested field (once per relation, context and
   * request, however many parent rows): what tests count planning with.
   */
  onPlan?: (dim: string, relation: string) => void;
  /**
   * A subscription's event whose result is being made (set by its field's resolver): results of
   * one event and one field set are serialised once over WebSocket (src/graphql/websocket.ts).
   */
  currentEvent?: object;
}

/** What one request's resolvers share besides the context's own maps. */
interface RequestState {
  /** The source and center_dett of each root field, by its response key. */
  roots: Map<string | number, ContextArgs>;
  /** Relations planned for nested fields, per read context, dimension and relation. */
  plans: Map<string, ExpandPlan | ApiError>;
}

/** The request's state, made by the first resolver that needs it (kept on the context itself). */
function stateOf(ctx: GraphQLContext): RequestState {
  ctx.resolverState ??= { roots: new Map(), plans: new Map() };
  return ctx.resolverState;
}

interface ContextArgs {
  source: string;
  center_dett?: string | null;
}

/** Each field's own scope: its `source` and `center_dett` arguments. */
function requestFor(ctx: GraphQLContext, args: ContextArgs): RequestContext {
  return inScope(ctx.caller, args.source, args.center_dett);
}

function readContextFor(ctx: GraphQLContext, args: ContextArgs): ReadContext {
  const request = requestFor(ctx, args);
  const key = `${request.source}\u0000${request.centerDett ?? ""}`;
  ctx.readContexts ??= new Map();
  let rc = ctx.readContexts.get(key);
  if (!rc) {
    rc = createReadContext(
      {
        db: ctx.services.readDb,
        metadata: ctx.services.metadata,
        countBound: ctx.services.config.countExactLimit,
        totals: ctx.services.totals,
      },
      request,
    );
    ctx.readContexts.set(key, rc);
  }
  return rc;
}

// ---------------------------------------------------------------- relations

/**
 * A relation of `dim` planned for a nested field: once per request, read context, dimension,
 * relation and the target's fields read (every parent row of the field shares the plan; without
 * `fields`, every field the caller may list). A relation that cannot be planned
 * (not readable) keeps its error, thrown at each of its fields.
 */
function planRelation(
  ctx: GraphQLContext,
  rc: ReadContext,
  dim: DimensionDef,
  name: string,
  fields?: ReadonlySet<string>,
): ExpandPlan {
  const plans = stateOf(ctx).plans;
  const read = fields ? [...fields].sort().join(",") : "*";
  const key = `${rc.request.source}\u0000${rc.request.centerDett ?? ""}\u0000${dim.code}\u0000${name}\u0000${read}`;
  let plan = plans.get(key);
  if (!plan) {
    try {
      const only = fields ? new Map([[name, fields]]) : undefined;
      plan = planExpand(rc.request, rc.model, dim, [name], only)[0]!;
      ctx.onPlan?.(dim.code, name);
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
      plan = err;
    }
    plans.set(key, plan);
  }
  if (plan instanceof ApiError) throw plan;
  return plan;
}

/**
 * The relations selected without arguments among `fields` (records of `dim`): their names (loaded
 * with the level's records), each with the tree under it planned now, once for all its records.
 * A relation with its own where, order or limit is loaded by its own resolver.
 */
function relationLevel(
  ctx: GraphQLContext,
  rc: ReadContext,
  dim: DimensionDef,
  fields: readonly SelectedField[],
): SelectedRelation[] {
  const byName = new Map<string, SelectedField[]>();
  for (const f of fields) {
    if (f.hasArguments || !dim.relationsByName.has(f.name)) continue;
    const list = byName.get(f.name);
    if (list) list.push(f);
    else byName.set(f.name, [f]);
  }
  return [...byName].map(([name, group]) => {
    const target = rc.model.dimensions.get(dim.relationsByName.get(name)!.target);
    const selections = group.flatMap((f) => f.selections);
    return {
      name,
      fields: target ? fieldsRead(target, selections) : new Set<string>(),
      children: target ? relationTrees(ctx, rc, target, selections) : [],
    };
  });
}

/** A relation selected without arguments, with the fields its selection reads of its target. */
interface SelectedRelation extends EmbeddedRelation {
  readonly fields: ReadonlySet<string>;
}

/**
 * The fields of `dim` a selection set reads: those it selects, and the key of each relation it
 * selects (the relation's resolver reads it from the record, with or without arguments).
 */
function fieldsRead(dim: DimensionDef, selections: readonly SelectedField[]): Set<string> {
  const out = new Set<string>();
  for (const f of selections) {
    if (dim.fieldsByCode.has(f.name)) out.add(f.name);
    else {
      const r = dim.relationsByName.get(f.name);
      if (r) out.add(r.parentKey);
    }
  }
  return out;
}

/**
 * `dim` in the request's metadata snapshot (the schema's may be another object of it): what a
 * root field's relations and fields are looked up in, as the levels under it are.
 */
function snapshotOf(rc: ReadContext, dim: DimensionDef): DimensionDef {
  return rc.model.dimensions.get(dim.code) ?? dim;
}

/** What the page's statement embeds of `relations`: the fields each one's selection reads. */
function expandFieldsOf(relations: readonly SelectedRelation[]): ExpandFields {
  return new Map(relations.map((r) => [r.name, r.fields]));
}

/** relationLevel's relations planned (those that cannot be are left to their field resolvers). */
function relationTrees(
  ctx: GraphQLContext,
  rc: ReadContext,
  dim: DimensionDef,
  fields: readonly SelectedField[],
): RelationTree[] {
  const out: RelationTree[] = [];
  for (const level of relationLevel(ctx, rc, dim, fields)) {
    let plan: ExpandPlan;
    try {
      plan = planRelation(ctx, rc, dim, level.name, level.fields);
    } catch {
      continue;
    }
    out.push({ plan, children: level.children });
  }
  return out;
}

// ---------------------------------------------------------------- arguments → query model

const COMPARISONS: Record<string, FilterOperator> = {
  _eq: "eq",
  _ne: "ne",
  _gt: "gt",
  _gte: "gte",
  _lt: "lt",
  _lte: "lte",
  _in: "in",
  _nin: "nin",
  _like: "like",
  _between: "between",
};

type Where = Record<string, unknown>;

/**
 * Filters of `where` arguments a document gives as literals: planned execution coerces those once
 * per document and freezes them (src/graphql/planned-execution.ts), so every request of the
 * document hands the same object; its filter is built once too, and frozen as well.
 */
const literalFilters = new WeakMap<Where, FilterExpr | null>();

/** `D_where` as a filter expression (null when it asks for nothing). */
export function whereToFilter(where: Where | null | undefined, origin = "where"): FilterExpr | null {
  if (!where) return null;
  if (origin !== "where" || !Object.isFrozen(where)) return filterOfWhere(where, origin);
  let filter = literalFilters.get(where);
  if (filter === undefined) {
    filter = deepFreeze(filterOfWhere(where, origin));
    literalFilters.set(where, filter);
  }
  return filter;
}

function filterOfWhere(where: Where, origin: string): FilterExpr | null {
  const items: FilterExpr[] = [];
  for (const [key, value] of Object.entries(where)) {
    if (value === null || value === undefined) continue;
    if (key === "_and" || key === "_or") {
      const parts = (value as Where[])
        .map((w, i) => whereToFilter(w, `${origin}.${key}[${i}]`))
        .filter((p): p is FilterExpr => p !== null);
      if (parts.length) items.push({ kind: key === "_and" ? "and" : "or", items: parts });
      continue;
    }
    if (key === "_not") {
      const inner = whereToFilter(value as Where, `${origin}._not`);
      if (inner) items.push({ kind: "not", item: inner });
      continue;
    }
    for (const [op, operand] of Object.entries(value as Where)) {
      if (operand === undefined) continue;
      const at = `${origin}.${key}.${op}`;
      if (op === "_is_null") {
        if (operand === null) continue;
        items.push({ kind: "condition", field: key, op: operand ? "eq" : "ne", value: null, origin: at });
        continue;
      }
      items.push({
        kind: "condition",
        field: key,
        op: COMPARISONS[op]!,
        value: operand as FilterLiteral | FilterLiteral[],
        origin: at,
      });
    }
  }
  if (!items.length) return null;
  return items.length === 1 ? items[0]! : { kind: "and", items };
}

/**
 * order_by's keys, each object one: GraphQL coerces an input object's fields in the schema's order,
 * not the order the client wrote them in, so `{UNIT_COST: asc, NAME: desc}` would silently sort by
 * NAME first. An object with more than one field is refused, saying how to write it.
 */
function orderToSort(orderBy: ReadonlyArray<Record<string, "asc" | "desc">> | null | undefined): SortSpec[] {
  const out: SortSpec[] = [];
  for (const item of orderBy ?? []) {
    const keys = Object.entries(item).filter(([, direction]) => direction);
    if (keys.length > 1)
      throw invalidParameter(
        "order_by",
        `order_by takes one field per object (the fields of one object have no order in GraphQL): give ${keys.map(([f]) => f).join(" and ")} objects of their own, in the order to sort by, e.g. [${keys.map(([f, d]) => `{${f}: ${d}}`).join(", ")}].`,
      );
    for (const [field, direction] of keys) out.push({ field, direction });
  }
  return out;
}

interface ListArgs extends ContextArgs {
  where?: Where | null;
  filter?: string | null;
  order_by?: Array<Record<string, "asc" | "desc">> | null;
  sort?: string | null;
  limit?: number | null;
  offset?: number | null;
  /** Keyset paging (root list fields only): the page size, and the cursor the page follows. */
  first?: number | null;
  after?: string | null;
  cond_trec?: string[] | null;
  force_list_cost?: string[] | null;
  search?: string | null;
}

const MAX_SEARCH_LENGTH = 200;

/** A paging argument: a whole number from `min` (0 unless said) to `max`, named as the query gave it. */
function pagingArg(
  name: "limit" | "offset" | "first",
  value: number | null | undefined,
  fallback: number,
  max: number,
  min = 0,
) {
  if (value === undefined || value === null) return fallback;
  if (!Number.isSafeInteger(value) || value < min || value > max)
    throw invalidParameter(name, `${name} must be a whole number from ${min} to ${max}; got ${value}.`);
  return value;
}

/** `filter:` in the REST $filter syntax; its errors name the argument. */
function filterArg(text: string | null | undefined, name = "filter"): FilterExpr | null {
  if (text === undefined || text === null || text.trim() === "") return null;
  try {
    return parseFilterExpression(text);
  } catch (err) {
    if (err instanceof ApiError && err.field === "$filter")
      throw new ApiError(err.status, err.code, err.errorType, err.message.replaceAll("$filter", name), {
        field: name,
        errors: err.errors?.map((e) => ({
          ...e,
          field: name,
          message: e.message.replaceAll("$filter", name),
        })),
        ...(err.details ? { details: err.details } : {}),
      });
    throw err;
  }
}

function condTrecArg(states: readonly string[] | null | undefined): TrecState[] | null {
  if (!states) return null;
  const upper = states.map((s) => s.trim().toUpperCase());
  for (const s of upper) {
    if (!(TREC_STATES as readonly string[]).includes(s))
      throw invalidParameter(
        "cond_trec",
        `cond_trec lists TREC states among N, M, C, P; got '${s.slice(0, 20)}'.`,
      );
  }
  if (!upper.length) throw invalidParameter("cond_trec", "cond_trec lists at least one TREC state.");
  return [...new Set(upper)] as TrecState[];
}

function searchArg(text: string | null | undefined): string | null {
  if (text === undefined || text === null) return null;
  const words = text.trim();
  if (words.length === 0 || words.length > MAX_SEARCH_LENGTH)
    throw invalidParameter("search", `search takes 1 to ${MAX_SEARCH_LENGTH} characters of words.`);
  return words;
}

/**
 * A list's page from its paging arguments: `limit`/`offset`, or keyset `first`/`after` (decisions
 * §21), never mixed; a keyset page holds at least one row (its end_cursor is its last row's, and
 * an empty page that is not the last would have none to go on from).
 */
function pageArgs(args: {
  first?: number | null;
  after?: string | null;
  limit?: number | null;
  offset?: number | null;
}): { numRows: number; offset: number } {
  const given = (v: unknown) => v !== undefined && v !== null;
  if (given(args.first) && given(args.limit))
    throw invalidParameter("first", "first and limit cannot be used together; first pages by cursor.");
  if ((given(args.first) || given(args.after)) && given(args.offset))
    throw invalidParameter(
      "offset",
      "offset cannot be used with first or after; after says where the page starts.",
    );
  if (given(args.after) && given(args.limit) && args.limit! < 1)
    throw invalidParameter(
      "limit",
      `limit must be at least 1 with after (a cursor page holds at least one row); got ${args.limit}.`,
    );
  return {
    numRows: given(args.first)
      ? pagingArg("first", args.first, DEFAULT_NUM_ROWS, MAX_NUM_ROWS, 1)
      : pagingArg("limit", args.limit, DEFAULT_NUM_ROWS, MAX_NUM_ROWS),
    offset: pagingArg("offset", args.offset, 0, Number.MAX_SAFE_INTEGER),
  };
}

/**
 * A list field's arguments as the query model (no REST parameters in between), with what its
 * selection reads: the total, the fields and the relations embedded (by default none of either:
 * every field, no relation).
 */
function listQuery(
  args: Omit<ListArgs, keyof ContextArgs>,
  read: Pick<ListQuery, "withTotal"> &
    Partial<Pick<ListQuery, "selectionFields" | "expand" | "expandFields">>,
): ListQuery {
  const where = whereToFilter(args.where);
  const filter = filterArg(args.filter);
  return emptyListQuery({
    filter: filter && where ? { kind: "and", items: [filter, where] } : (filter ?? where),
    sort: [...orderToSort(args.order_by), ...(args.sort ? parseSortExpression(args.sort) : [])],
    ...pageArgs(args),
    condTrec: condTrecArg(args.cond_trec),
    forceListCost: args.force_list_cost ?? [],
    search: searchArg(args.search),
    ...read,
  });
}

// ---------------------------------------------------------------- keyset cursors

/**
 * The cursor codec of a deployment: its key derived from the token signing secret, loaded once
 * per configuration (the file DATA_DIR/jwt-secret is read at most once).
 */
const cursorCodecs = new WeakMap<Config, Promise<CursorCodec>>();

function cursorCodecFor(ctx: GraphQLContext): Promise<CursorCodec> {
  const config = ctx.services.config;
  let codec = cursorCodecs.get(config);
  if (!codec) {
    codec = loadSigningSecret(config).then(cursorCodec);
    cursorCodecs.set(config, codec);
  }
  return codec;
}

/** What a list's cursors are bound to: the list, its sort and rows, and the caller. */
function cursorScope(rc: ReadContext, dim: DimensionDef, query: ListQuery): CursorScope {
  return {
    dim: dim.code,
    source: rc.request.source,
    centerDett: rc.request.centerDett,
    tenantId: rc.request.principal.tenantId,
    userId: rc.request.principal.userId,
    sort: query.sort,
    filter: query.filter,
    search: query.search,
    condTrec: query.condTrec,
  };
}

/**
 * What a grouping's cursors are bound to: a list's scope (source, filter, sort, caller), with its
 * group fields and aggregates in the dimension's place, so that a list's or another grouping's
 * cursor is refused as any other list's is.
 */
function aggregateCursorScope(
  rc: ReadContext,
  dim: DimensionDef,
  query: ListQuery,
  groupBy: readonly string[],
  aggregates: readonly AggregateSpec[],
): CursorScope {
  const grouping = JSON.stringify([groupBy, aggregates.map((a) => [a.fn, a.field])]);
  return { ...cursorScope(rc, dim, query), dim: `${dim.code}#aggregate:${grouping}` };
}

// ---------------------------------------------------------------- errors

function fieldNotVisible(dim: DimensionDef, field: string): GraphQLError {
  return new GraphQLError(`${dim.code}.${field} is not visible to the caller in this context.`, {
    extensions: { code: "FIELD_NOT_VISIBLE", status: 403, field },
  });
}

// ---------------------------------------------------------------- the resolvers

export function graphqlResolvers(): SchemaResolvers<GraphQLContext> {
  // Selection sets walked once per document where they name no variable (kept by these resolvers).
  const lookahead = createLookahead();
  const writeDeps = (ctx: GraphQLContext) => ({
    db: ctx.services.db,
    metadata: ctx.services.metadata,
    config: ctx.services.config,
    commands: ctx.services.commands,
    creates: ctx.services.creates,
    budget: ctx.writeBudget,
  });

  return {
    list: (dim) => async (_root, args: ListArgs, ctx, info) => {
      const rc = readContextFor(ctx, args);
      stateOf(ctx).roots.set(info.path.key, contextOf(args));
      // One walk of the selection set: the fields read under data, the relations (planned here,
      // once, with what is selected under them) and whether meta.total is wanted.
      const current = snapshotOf(rc, dim);
      const selection = lookahead(info);
      const data = under(selection, "data");
      const relations = relationLevel(ctx, rc, current, data);
      const metaFields = under(selection, "meta");
      const withTotal = metaFields.some((f) => f.name === "total");
      const query = listQuery(args, {
        withTotal,
        selectionFields: fieldsRead(current, data),
        expand: relations.map((r) => r.name),
        expandFields: expandFieldsOf(relations),
      });
      const byCursor = args.first !== undefined && args.first !== null;
      const wantsCursor = metaFields.some((f) => f.name === "end_cursor");
      const hasAfter = args.after !== undefined && args.after !== null;
      const codec = hasAfter || wantsCursor ? await cursorCodecFor(ctx) : null;
      const scope = cursorScope(rc, current, query);
      const after = hasAfter ? codec!.decode(scope, args.after!) : null;
      const result = await listRecords(
        rc,
        dim.code,
        byCursor || hasAfter ? { ...query, keyset: { after } } : query,
      );
      await attachRelationTree(rc, relations, result.data);
      const endKey = result.kind === "records" ? result.endKey : null;
      const end_cursor = codec && endKey ? codec.encode(scope, endKey) : null;
      return { data: result.data, meta: wantsCursor ? { ...result.meta, end_cursor } : result.meta };
    },

    byId: (dim) => async (_root, args: ContextArgs & { id: string }, ctx, info) => {
      const rc = readContextFor(ctx, args);
      stateOf(ctx).roots.set(info.path.key, contextOf(args));
      const current = snapshotOf(rc, dim);
      const selection = lookahead(info);
      const relations = relationLevel(ctx, rc, current, selection);
      try {
        const result = await getRecord(rc, dim.code, args.id, {
          fields: null,
          selectionFields: fieldsRead(current, selection),
          expand: relations.map((r) => r.name),
          expandFields: expandFieldsOf(relations),
          condTrec: null,
          debug: false,
        });
        await attachRelationTree(rc, relations, [result.data]);
        return result.data;
      } catch (err) {
        if (err instanceof NotFoundError && err.code === "RECORD_NOT_FOUND") return null;
        throw err;
      }
    },

    count: (dim) => async (_root, args: ListArgs, ctx) => {
      const rc = readContextFor(ctx, args);
      const query = listQuery({ ...args, limit: null, offset: null }, { withTotal: true });
      return (await countRecords(rc, dim.code, query)).count;
    },

    aggregate:
      (dim) =>
      async (
        _root,
        args: ListArgs & {
          group_by: string[];
          aggregate: Array<{ fn: AggregateSpec["fn"]; field?: string | null }>;
          order_by?: string | null;
        },
        ctx,
        info,
      ) => {
        const rc = readContextFor(ctx, args);
        const aggregates: AggregateSpec[] = args.aggregate.map((a) => {
          const field = a.field === undefined || a.field === null || a.field === "*" ? null : a.field;
          if (field === null && a.fn !== "COUNT")
            throw invalidParameter("aggregate", `${a.fn} needs a field: {fn: ${a.fn}, field: "FIELD"}.`);
          return { fn: a.fn, field, alias: field === null ? a.fn : `${a.fn}_${field}` };
        });
        const metaFields = under(lookahead(info), "meta");
        const wantsCursor = metaFields.some((f) => f.name === "end_cursor");
        const query = listQuery(
          { ...args, order_by: null, sort: args.order_by ?? null },
          { withTotal: metaFields.some((f) => f.name === "total") },
        );
        // Keyset cursors (decisions §21) as a list's: the groups after the cursor's in the
        // grouping's order (order_by, then the group fields), bound to the grouping and the caller.
        const byCursor = args.first !== undefined && args.first !== null;
        const hasAfter = args.after !== undefined && args.after !== null;
        const codec = hasAfter || wantsCursor ? await cursorCodecFor(ctx) : null;
        const scope = aggregateCursorScope(rc, dim, query, args.group_by, aggregates);
        const after = hasAfter ? codec!.decode(scope, args.after!) : null;
        const result = await listRecords(rc, dim.code, {
          ...query,
          groupBy: args.group_by,
          aggregates,
          ...(byCursor || hasAfter ? { keyset: { after } } : {}),
          ...(wantsCursor ? { endKey: true } : {}),
        });
        if (!wantsCursor) return { data: result.data, meta: result.meta };
        const endKey = result.kind === "groups" ? result.endKey : null;
        const end_cursor = endKey ? codec!.encode(scope, endKey) : null;
        return { data: result.data, meta: { ...result.meta, end_cursor } };
      },

    field: (dim, field) => (parent) => {
      if (field.code in parent) return parent[field.code];
      throw fieldNotVisible(dim, field.code);
    },

    // Not async: a relation already loaded with its parent is returned as is, so that graphql-js
    // completes the row without a promise (one per row and relation otherwise).
    forward: (dim, relation) => (parent, _args, ctx, info) => {
      if (relation.name in parent) return parent[relation.name];
      if (!(relation.fromField in parent)) throw fieldNotVisible(dim, relation.fromField);
      const rc = readContextFor(ctx, rootArgs(ctx, info));
      return loadPlannedRelation(rc, planRelation(ctx, rc, dim, relation.name), parent[relation.fromField]);
    },

    reverse: (dim, relation) => (parent, args: Omit<ListArgs, keyof ContextArgs>, ctx, info) => {
      const hasArgs = Object.values(args).some((v) => v !== undefined && v !== null);
      if (!hasArgs && relation.name in parent) return parent[relation.name];
      if (!(relation.toField in parent)) throw fieldNotVisible(dim, relation.toField);
      const context = rootArgs(ctx, info);
      const rc = readContextFor(ctx, context);
      if (!hasArgs)
        return loadPlannedRelation(rc, planRelation(ctx, rc, dim, relation.name), parent[relation.toField]);
      const key = parent[relation.toField];
      if (key === null || key === undefined) return [];
      // With their own where/order/limit: every parent of this field (same arguments) in one
      // statement, through a loader of the request. Of the root field the child takes its scope
      // (source, center_dett: the read context) and nothing else: the root's where, filter,
      // search, order, cond_trec and cursor paging select the parents, not their children.
      const loaderKey = `${relation.name}\u0000${context.source}\u0000${context.center_dett ?? ""}\u0000${JSON.stringify(args)}`;
      ctx.pageLoaders ??= new Map();
      let loader = ctx.pageLoaders.get(loaderKey);
      if (!loader) {
        const query = listQuery(args, { withTotal: false });
        loader = new DataLoader<string | number, DataRecord[], string>(
          (keys) => listRelatedPages(rc, relation.fromDim, relation.fromField, keys, query),
          { cacheKeyFn: String, maxBatchSize: 1000 },
        );
        ctx.pageLoaders.set(loaderKey, loader);
      }
      return loader.load(key as string | number);
    },

    create: (dim) => async (_root, args: ContextArgs & { data: Record<string, unknown> }, ctx) => {
      const request = requestFor(ctx, args);
      const result = await createOne(writeDeps(ctx), request, dim.code, plain(args.data));
      return {
        data: result.visible,
        message: `${result.dim} ${result.recordId} created.`,
        event_id: result.eventId,
        cascaded: presentCascaded(result),
      };
    },

    update:
      (dim, mode) =>
      async (_root, args: ContextArgs & { id: string; data: Record<string, unknown> }, ctx) => {
        const request = requestFor(ctx, args);
        const result = await updateOne(writeDeps(ctx), request, dim.code, args.id, plain(args.data), mode);
        return {
          data: result.visible,
          message: `${result.dim} ${result.recordId} updated.`,
          event_id: result.eventId,
          cascaded: presentCascaded(result),
        };
      },

    remove: (dim) => async (_root, args: ContextArgs & { id: string; force: boolean }, ctx) => {
      const request = requestFor(ctx, args);
      const result = await deleteOne(writeDeps(ctx), request, dim.code, args.id, args.force);
      return {
        data: result.visible,
        message: `${result.dim} ${result.recordId} ${args.force ? "permanently deleted" : "deleted"}.`,
        event_id: result.eventId,
        cascaded: presentCascaded(result),
      };
    },

    vars:
      () =>
      async (
        _root,
        args: ContextArgs & {
          field: string;
          filter?: string | null;
          full_list?: boolean | null;
          limit?: number | null;
          offset?: number | null;
        },
        ctx,
      ) => {
        const field = args.field.trim();
        if (!field) throw invalidParameter("field", "field names the field whose values to list.");
        // Paged as REST's $num_rows/$offset: a page shorter than `limit` is the last one (the list
        // type has no room for REST's X-Has-More).
        return lookupValues(readContextFor(ctx, args), {
          field,
          filter: filterArg(args.filter),
          fullList: args.full_list === true,
          limit: pagingArg("limit", args.limit, MAX_LOOKUP_ITEMS, MAX_LOOKUP_ITEMS),
          offset: pagingArg("offset", args.offset, 0, Number.MAX_SAFE_INTEGER),
        });
      },

    document:
      () =>
      async (
        _root,
        args: ContextArgs & {
          name: string;
          key: string;
          params?: Record<string, unknown> | null;
          compact?: boolean | null;
        },
        ctx,
      ) => {
        const params: Record<string, string> = {};
        for (const [k, v] of Object.entries(args.params ?? {}))
          if (v !== null && v !== undefined) params[k] = String(v);
        const deps = { db: ctx.services.readDb, metadata: ctx.services.metadata };
        return (
          await getDocument(deps, requestFor(ctx, args), args.name, args.key, params, args.compact ?? false)
        ).data;
      },

    command:
      (dim) => async (_root, args: ContextArgs & { name: string; id: string; data?: unknown }, ctx) => {
        const result = await runCommand(writeDeps(ctx), requestFor(ctx, args), dim.code, args.name, {
          id: args.id,
          data: args.data === undefined || args.data === null ? {} : plain(args.data),
        });
        return {
          data: result.visible,
          message: `${result.dim} ${result.recordId}: ${args.name} done.`,
          event_id: result.eventId,
          cascaded: presentCascaded(result),
        };
      },

    history:
      (dim) =>
      async (
        _root,
        args: ContextArgs & {
          id: string;
          limit?: number | null;
          offset?: number | null;
          first?: number | null;
          after?: string | null;
        },
        ctx,
        info,
      ) => {
        const rc = readContextFor(ctx, args);
        const { numRows, offset } = pageArgs(args);
        const given = (v: unknown) => v !== undefined && v !== null;
        // Keyset cursors (decisions §21): a record's revisions, newest first, bound to the record
        // and the caller; the cursor holds the page's last revision.
        const wantsCursor = lookahead(info).some(
          (f) => f.name === "meta" && f.selections.some((m) => m.name === "end_cursor"),
        );
        const codec = given(args.after) || wantsCursor ? await cursorCodecFor(ctx) : null;
        const scope: CursorScope = {
          dim: `${dim.code}#history:${args.id}`,
          source: rc.request.source,
          centerDett: rc.request.centerDett,
          tenantId: rc.request.principal.tenantId,
          userId: rc.request.principal.userId,
          sort: [],
          filter: null,
          search: null,
          condTrec: null,
        };
        const before = given(args.after) ? Number(codec!.decode(scope, args.after!)[0]) : undefined;
        if (before !== undefined && !Number.isSafeInteger(before))
          throw invalidParameter("after", "after is not a cursor of this history.");
        const page = await listHistory(rc, dim.code, args.id, {
          limit: numRows,
          offset,
          ...(before !== undefined ? { before } : {}),
        });
        if (!wantsCursor) return page;
        const last = page.data.at(-1);
        return {
          ...page,
          meta: { ...page.meta, end_cursor: last ? codec!.encode(scope, [last.revision]) : null },
        };
      },

    restoreRevision: (dim) => async (_root, args: ContextArgs & { id: string; revision: number }, ctx) => {
      const result = await restoreRevision(
        writeDeps(ctx),
        requestFor(ctx, args),
        dim.code,
        args.id,
        args.revision,
      );
      return {
        data: result.visible,
        message: `${result.dim} ${result.recordId} restored to revision ${args.revision}.`,
        event_id: result.eventId,
        cascaded: presentCascaded(result),
      };
    },

    batchCreate: (dim) => async (_root, args: ContextArgs & { data: Record<string, unknown>[] }, ctx) => {
      const result = await batchCreate(writeDeps(ctx), requestFor(ctx, args), dim.code, plain(args.data));
      return {
        success: result.success,
        failed: result.failed,
        results: result.results.map((r) => ({
          index: r.index,
          id: r.id,
          status: r.status,
          event_id: r.result?.eventId ?? null,
          error: r.error ?? null,
        })),
      };
    },

    batch: () => async (_root, args: { operations: unknown[] }, ctx) => {
      const results = await runCoreBatch(writeDeps(ctx), inScope(ctx.caller, null), {
        operations: plain(args.operations),
      });
      return results.map((r) => ({
        index: r.index,
        ref: r.ref,
        method: r.method,
        dim: r.dim,
        id: r.result.recordId,
        data: r.result.visible,
        event_id: r.result.eventId,
        cascaded: presentCascaded(r.result),
      }));
    },

    events: (dim) => (_root, args: ContextArgs & { event_types?: string[] | null }, ctx) =>
      subscribeToEvents(ctx.services, requestFor(ctx, args), dim.code, args.event_types ?? null),

    event: () => (event, _args, ctx) => {
      ctx.currentEvent = event as object;
      return event;
    },
  };
}

/** A root field's scope, its source and center_dett: all that the fields under it take of it. */
function contextOf(args: ContextArgs): ContextArgs {
  return { source: args.source, center_dett: args.center_dett };
}

/** The source and center_dett of the root field a nested field belongs to. */
function rootArgs(ctx: GraphQLContext, info: GraphQLResolveInfo): ContextArgs {
  let path = info.path;
  while (path.prev) path = path.prev;
  return stateOf(ctx).roots.get(path.key) ?? sourceOf(info, path.key);
}

/** The same read from the operation's root field (a root field that did not register). */
function sourceOf(info: GraphQLResolveInfo, rootKey: string | number): ContextArgs {
  const root = info.operation.selectionSet.selections.find(
    (s) => s.kind === Kind.FIELD && (s.alias?.value ?? s.name.value) === rootKey,
  );
  const out: ContextArgs = { source: "", center_dett: null };
  if (root?.kind !== Kind.FIELD) return out;
  for (const arg of root.arguments ?? []) {
    const v = arg.value;
    const value =
      v.kind === Kind.STRING
        ? v.value
        : v.kind === Kind.VARIABLE
          ? (info.variableValues[v.name.value] as string)
          : null;
    if (arg.name.value === "source") out.source = value ?? "";
    if (arg.name.value === "center_dett") out.center_dett = value;
  }
  return out;
}
