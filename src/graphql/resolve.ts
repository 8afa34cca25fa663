// GraphQL fields → the same read and write resolvers as REST. Arguments become the typed query
// model (where → FilterExpr, order_by → SortSpec); what is selected decides what is loaded
// (relations through the request's DataLoaders, `total` only when asked for). Nothing here decides
// access: the resolvers do, with the REST errors.
import DataLoader from "dataloader";
import { GraphQLError, type GraphQLResolveInfo, Kind, type SelectionSetNode } from "graphql";
import { NotFoundError } from "../errors.ts";
import {
  parseAggregates,
  parseListParams,
  parseLookupParams,
  type QueryParams,
} from "../query/rest-params.ts";
import type {
  AggregateSpec,
  FilterExpr,
  FilterLiteral,
  FilterOperator,
  ListQuery,
  SortSpec,
} from "../query/types.ts";
import {
  countRecords,
  createReadContext,
  getRecord,
  listRecords,
  listRelatedPages,
  loadRelated,
  type ReadContext,
  lookupValues,
  subscribeToEvents,
} from "../resolvers/read/index.ts";
import { getDocument } from "../resolvers/read/documents.ts";
import type { DataRecord } from "../resolvers/read/common.ts";
import { batchCreate } from "../resolvers/write/batch.ts";
import { runCommand } from "../resolvers/write/commands.ts";
import type { RequestBudget } from "../resolvers/write/context.ts";
import { runCoreBatch } from "../resolvers/write/core-batch.ts";
import { createOne, deleteOne, updateOne } from "../resolvers/write/operations.ts";
import type { SchemaResolvers } from "../schema/build.ts";
import type { Services } from "../services.ts";
import { type Caller, type DimensionDef, inScope, type RequestContext } from "../types.ts";

/** One GraphQL request: the caller (authenticated once, source-less) and the services. */
export interface GraphQLContext {
  caller: Caller;
  services: Pick<Services, "db" | "readDb" | "metadata" | "config" | "feed" | "commands">;
  /** Read contexts per (source, center_dett), so that one operation shares its loaders. */
  readContexts: Map<string, ReadContext>;
  /** Loaders of reverse relations with their own arguments, per relation, context and arguments. */
  pageLoaders: Map<string, DataLoader<string | number, DataRecord[], string>>;
  /** The operation's write bounds, spent by every mutation field together (issue 18). */
  writeBudget: RequestBudget;
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
  let rc = ctx.readContexts.get(key);
  if (!rc) {
    rc = createReadContext(
      {
        db: ctx.services.readDb,
        metadata: ctx.services.metadata,
        countBound: ctx.services.config.countExactLimit,
      },
      request,
    );
    ctx.readContexts.set(key, rc);
  }
  return rc;
}

// ---------------------------------------------------------------- selections

/**
 * The field names selected under `path` of the current field (fragments followed); with
 * `withoutArguments`, only fields selected without arguments (a relation with its own where,
 * order or limit is loaded by its own resolver, not with the page).
 */
function selected(info: GraphQLResolveInfo, path: readonly string[], withoutArguments = false): Set<string> {
  let sets: SelectionSetNode[] = info.fieldNodes.flatMap((n) => (n.selectionSet ? [n.selectionSet] : []));
  for (const step of path) {
    const next: SelectionSetNode[] = [];
    for (const set of sets) {
      for (const f of fieldsOf(info, set)) {
        if (f.name === step && f.selectionSet) next.push(f.selectionSet);
      }
    }
    sets = next;
  }
  const names = new Set<string>();
  const withArguments = new Set<string>();
  for (const set of sets) {
    for (const f of fieldsOf(info, set)) {
      names.add(f.name);
      if (f.hasArguments) withArguments.add(f.name);
    }
  }
  if (withoutArguments) for (const n of withArguments) names.delete(n);
  return names;
}

function fieldsOf(
  info: GraphQLResolveInfo,
  set: SelectionSetNode,
): Array<{ name: string; selectionSet: SelectionSetNode | undefined; hasArguments: boolean }> {
  const out: Array<{ name: string; selectionSet: SelectionSetNode | undefined; hasArguments: boolean }> = [];
  for (const s of set.selections) {
    if (s.kind === Kind.FIELD)
      out.push({
        name: s.name.value,
        selectionSet: s.selectionSet,
        hasArguments: (s.arguments?.length ?? 0) > 0,
      });
    else if (s.kind === Kind.INLINE_FRAGMENT) out.push(...fieldsOf(info, s.selectionSet));
    else {
      const fragment = info.fragments[s.name.value];
      if (fragment) out.push(...fieldsOf(info, fragment.selectionSet));
    }
  }
  return out;
}

/** The relations of `dim` among the selected names: loaded with the page, one statement each. */
function selectedRelations(dim: DimensionDef, names: Set<string>): string[] {
  return [...dim.relations, ...dim.reverseRelations].map((r) => r.name).filter((n) => names.has(n));
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

/** `D_where` as a filter expression (null when it asks for nothing). */
export function whereToFilter(where: Where | null | undefined, origin = "where"): FilterExpr | null {
  if (!where) return null;
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

function orderToSort(orderBy: ReadonlyArray<Record<string, "asc" | "desc">> | null | undefined): SortSpec[] {
  const out: SortSpec[] = [];
  for (const item of orderBy ?? []) {
    for (const [field, direction] of Object.entries(item)) {
      if (direction) out.push({ field, direction });
    }
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
  cond_trec?: string[] | null;
  force_list_cost?: string[] | null;
  search?: string | null;
}

/** The REST-syntax arguments go through the REST parser (same checks, same errors). */
function listQuery(args: ListArgs, expand: string[], withTotal: boolean): ListQuery {
  const params: Record<string, string> = {};
  if (args.filter) params.$filter = args.filter;
  if (args.sort) params.sort = args.sort;
  if (args.cond_trec) params.cond_trec = args.cond_trec.join(",");
  if (args.force_list_cost?.length) params.forceListCost = args.force_list_cost.join(",");
  if (args.limit !== undefined && args.limit !== null) params.$num_rows = String(args.limit);
  if (args.offset !== undefined && args.offset !== null) params.$offset = String(args.offset);
  if (args.search !== undefined && args.search !== null) params.$search = args.search;
  const base = parseListParams(params as QueryParams);
  const where = whereToFilter(args.where);
  const filter =
    base.filter && where ? { kind: "and" as const, items: [base.filter, where] } : (base.filter ?? where);
  return { ...base, filter, sort: [...orderToSort(args.order_by), ...base.sort], expand, withTotal };
}

// ---------------------------------------------------------------- errors

function fieldNotVisible(dim: DimensionDef, field: string): GraphQLError {
  return new GraphQLError(`${dim.code}.${field} is not visible to the caller in this context.`, {
    extensions: { code: "FIELD_NOT_VISIBLE", status: 403, field },
  });
}

/** Plain objects (graphql-js gives input objects without a prototype). */
function plain<T>(value: T): T {
  return value === undefined ? value : JSON.parse(JSON.stringify(value));
}

// ---------------------------------------------------------------- the resolvers

export function graphqlResolvers(): SchemaResolvers<GraphQLContext> {
  const writeDeps = (ctx: GraphQLContext) => ({
    db: ctx.services.db,
    metadata: ctx.services.metadata,
    config: ctx.services.config,
    commands: ctx.services.commands,
    budget: ctx.writeBudget,
  });

  return {
    list: (dim) => async (_root, args: ListArgs, ctx, info) => {
      const rc = readContextFor(ctx, args);
      const relations = selected(info, ["data"], true);
      const meta = selected(info, ["meta"]);
      const result = await listRecords(
        rc,
        dim.code,
        listQuery(args, selectedRelations(dim, relations), meta.has("total")),
      );
      return { data: result.data, meta: result.meta };
    },

    byId: (dim) => async (_root, args: ContextArgs & { id: string }, ctx, info) => {
      const rc = readContextFor(ctx, args);
      const expand = selectedRelations(dim, selected(info, [], true));
      try {
        const result = await getRecord(rc, dim.code, args.id, {
          fields: null,
          expand,
          condTrec: null,
          debug: false,
        });
        return result.data;
      } catch (err) {
        if (err instanceof NotFoundError && err.code === "RECORD_NOT_FOUND") return null;
        throw err;
      }
    },

    count: (dim) => async (_root, args: ListArgs, ctx) => {
      const rc = readContextFor(ctx, args);
      const query = listQuery({ ...args, limit: null, offset: null }, [], true);
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
      ) => {
        const rc = readContextFor(ctx, args);
        // Through REST's parser: the same checks (a field for every function but COUNT).
        const aggregates = parseAggregates(
          args.aggregate.map((a) => (a.field ? `${a.fn}(${a.field})` : a.fn)).join(","),
        );
        const query = listQuery({ ...args, order_by: null, sort: args.order_by ?? null }, [], true);
        const result = await listRecords(rc, dim.code, { ...query, groupBy: args.group_by, aggregates });
        return result.data;
      },

    field: (dim, field) => (parent) => {
      if (field.code in parent) return parent[field.code];
      throw fieldNotVisible(dim, field.code);
    },

    forward: (dim, relation) => async (parent, _args, ctx, info) => {
      if (relation.name in parent) return parent[relation.name];
      if (!(relation.fromField in parent)) throw fieldNotVisible(dim, relation.fromField);
      const rc = readContextFor(ctx, sourceOf(info));
      return loadRelated(rc, dim.code, relation.name, parent[relation.fromField]);
    },

    reverse: (dim, relation) => async (parent, args: Omit<ListArgs, keyof ContextArgs>, ctx, info) => {
      const context = sourceOf(info);
      const hasArgs = Object.values(args).some((v) => v !== undefined && v !== null);
      if (!hasArgs && relation.name in parent) return parent[relation.name];
      if (!(relation.toField in parent)) throw fieldNotVisible(dim, relation.toField);
      const rc = readContextFor(ctx, context);
      if (!hasArgs) return loadRelated(rc, dim.code, relation.name, parent[relation.toField]);
      const key = parent[relation.toField];
      if (key === null || key === undefined) return [];
      // With their own where/order/limit: every parent of this field (same arguments) in one
      // statement, through a loader of the request.
      const loaderKey = `${relation.name}\u0000${context.source}\u0000${context.center_dett ?? ""}\u0000${JSON.stringify(args)}`;
      let loader = ctx.pageLoaders.get(loaderKey);
      if (!loader) {
        const query = listQuery({ ...context, ...args }, [], false);
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
        };
      },

    remove: (dim) => async (_root, args: ContextArgs & { id: string; force: boolean }, ctx) => {
      const request = requestFor(ctx, args);
      const result = await deleteOne(writeDeps(ctx), request, dim.code, args.id, args.force);
      return {
        data: result.visible,
        message: `${result.dim} ${result.recordId} ${args.force ? "permanently deleted" : "deleted"}.`,
        event_id: result.eventId,
      };
    },

    vars:
      () =>
      async (
        _root,
        args: ContextArgs & { field: string; filter?: string | null; full_list?: boolean | null },
        ctx,
      ) => {
        const params: Record<string, string> = { field: args.field };
        if (args.filter) params.$filter = args.filter;
        if (args.full_list) params.getACList = "1";
        return lookupValues(readContextFor(ctx, args), parseLookupParams(params as QueryParams));
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
      }));
    },

    events: (dim) => (_root, args: ContextArgs & { event_types?: string[] | null }, ctx) =>
      subscribeToEvents(ctx.services, requestFor(ctx, args), dim.code, args.event_types ?? null),
  };
}

/** The source and center_dett of the root field a nested field belongs to. */
function sourceOf(info: GraphQLResolveInfo): ContextArgs {
  let path = info.path;
  while (path.prev) path = path.prev;
  const root = info.operation.selectionSet.selections.find(
    (s) => s.kind === Kind.FIELD && (s.alias?.value ?? s.name.value) === path.key,
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
