// The GraphQL schema of graphql.md for one access profile (src/schema/profile.ts) under one
// metadata version: the dimensions, fields and mutations the profile shows. graphql-js types are
// made in loops over the dimensions (Pothos' typed builder adds nothing when every type is
// generated at run time: see docs/architecture.md); the types a profile shares with others come
// from the version's shared types (src/schema/shared-types.ts), the root types are the profile's.
// The builder is pure: the field resolvers are handed in.
import {
  GraphQLBoolean,
  type GraphQLFieldConfig,
  type GraphQLFieldConfigArgumentMap,
  type GraphQLFieldConfigMap,
  type GraphQLFieldResolver,
  GraphQLID,
  GraphQLInt,
  GraphQLObjectType,
  type GraphQLOutputType,
  GraphQLSchema,
  GraphQLString,
} from "graphql";
import type { DimensionDef, FieldDef, MetadataModel, Relation } from "../types.ts";
import { fullProfile, type SchemaProfile } from "./profile.ts";
import { JSONScalar } from "./scalars.ts";
import { type ComponentTypes, createSharedTypes, type SharedTypes } from "./shared-types.ts";
import {
  AggregateInput,
  AggregatePage,
  BatchOperation,
  BatchOperationResult,
  BatchResult,
  contextArgs,
  DimensionEvent,
  HistoryPage,
  input,
  list,
  NO_EXTENSIONS,
  nn,
} from "./static-types.ts";

/** What a Mutation field writes (its `extensions.writes`): a create, a batch create, one record, a core batch. */
export type WriteKind =
  | { kind: "create"; dim: string }
  | { kind: "batch_create"; dim: string }
  | { kind: "one"; dim: string }
  | { kind: "core_batch" };

/** What each generated field does; src/graphql/resolve.ts implements it over the shared resolvers. */
export interface SchemaResolvers<C> {
  list(dim: DimensionDef): GraphQLFieldResolver<unknown, C>;
  byId(dim: DimensionDef): GraphQLFieldResolver<unknown, C>;
  count(dim: DimensionDef): GraphQLFieldResolver<unknown, C>;
  aggregate(dim: DimensionDef): GraphQLFieldResolver<unknown, C>;
  field(dim: DimensionDef, field: FieldDef): GraphQLFieldResolver<Record<string, unknown>, C>;
  forward(dim: DimensionDef, relation: Relation): GraphQLFieldResolver<Record<string, unknown>, C>;
  reverse(dim: DimensionDef, relation: Relation): GraphQLFieldResolver<Record<string, unknown>, C>;
  create(dim: DimensionDef): GraphQLFieldResolver<unknown, C>;
  update(dim: DimensionDef, mode: "put" | "patch"): GraphQLFieldResolver<unknown, C>;
  remove(dim: DimensionDef): GraphQLFieldResolver<unknown, C>;
  batchCreate(dim: DimensionDef): GraphQLFieldResolver<unknown, C>;
  batch(): GraphQLFieldResolver<unknown, C>;
  /** vars: foreign-key lookups (REST GET /core/vars). */
  vars(): GraphQLFieldResolver<unknown, C>;
  /** document: a TB_DOCUMENT document (REST GET /document/{name}/{key}). */
  document(): GraphQLFieldResolver<unknown, C>;
  /** D_command: a named operation (decisions.md §15). */
  command(dim: DimensionDef): GraphQLFieldResolver<unknown, C>;
  /** D_history: a record's revisions (decisions.md §19). */
  history(dim: DimensionDef): GraphQLFieldResolver<unknown, C>;
  /** D_restore_revision: a revision written back as an update (decisions.md §19). */
  restoreRevision(dim: DimensionDef): GraphQLFieldResolver<unknown, C>;
  /** Subscription: an async iterator of DimensionEvent payloads. */
  events(dim: DimensionDef): GraphQLFieldResolver<unknown, C>;
  /** A subscription field's value: the event its iterator gave. */
  event(): GraphQLFieldResolver<unknown, C>;
}

/** A root field's config: its arguments after the context ones (source, center_dett). */
function rootField<C>(
  type: GraphQLOutputType,
  args: GraphQLFieldConfigArgumentMap,
  resolve: GraphQLFieldResolver<unknown, C>,
  description?: string,
): GraphQLFieldConfig<unknown, C> {
  return { type, description, args: { ...contextArgs, ...args }, resolve, extensions: NO_EXTENSIONS };
}

/** The schema of `profile`, its types taken from (and kept in) `types`, of the same metadata version. */
export function buildProfileSchema<C>(profile: SchemaProfile, types: SharedTypes<C>): GraphQLSchema {
  if (profile.version !== types.model.version)
    throw new Error(`Profile of version ${profile.version}, types of ${types.model.version}.`);
  const { resolvers } = types;
  const queryFields: GraphQLFieldConfigMap<unknown, C> = {};
  const mutationFields: GraphQLFieldConfigMap<unknown, C> = {};
  const subscriptionFields: GraphQLFieldConfigMap<unknown, C> = {};
  const trecArgs: GraphQLFieldConfigArgumentMap = { cond_trec: input(list(nn(GraphQLString))) };
  const idArgs: GraphQLFieldConfigArgumentMap = { id: input(nn(GraphQLID)) };

  // The types of each dimension's component; the root fields in code order.
  const objectsOf = new Map<string, ComponentTypes>();
  for (const component of profile.components) {
    const objects = types.component(component);
    for (const member of component.members) objectsOf.set(member.dim.code, objects);
  }
  for (const shownDim of profile.dimensions.values()) {
    const { dim, shown, writes } = shownDim;
    const objects = objectsOf.get(dim.code)!;
    const code = dim.code;
    const where = types.where(dim, shown);
    queryFields[code] = rootField(
      nn(objects.page(code)),
      {
        ...types.listArgs(shownDim),
        first: input(
          GraphQLInt,
          "Keyset paging: the page size, 1 to 1000 (as limit, which it replaces), with after.",
        ),
        after: input(
          GraphQLString,
          "Keyset paging: a meta.end_cursor of this list; the page holds the rows after it.",
        ),
        ...trecArgs,
        force_list_cost: input(list(nn(GraphQLString))),
      },
      resolvers.list(dim),
    );
    queryFields[`${code}_by_id`] = rootField(objects.object(code), idArgs, resolvers.byId(dim));
    queryFields[`${code}_count`] = rootField(
      nn(GraphQLInt),
      { where: input(where), filter: input(GraphQLString), ...trecArgs },
      resolvers.count(dim),
    );
    queryFields[`${code}_aggregate`] = rootField(
      nn(AggregatePage),
      {
        where: input(where),
        filter: input(GraphQLString),
        group_by: input(nn(list(nn(GraphQLString)))),
        aggregate: input(nn(list(nn(AggregateInput)))),
        order_by: input(GraphQLString, "REST sort syntax over group fields and aggregates."),
        limit: input(GraphQLInt),
        offset: input(GraphQLInt),
        first: input(
          GraphQLInt,
          "Keyset paging: the page size, 1 to 1000 (as limit, which it replaces), with after.",
        ),
        after: input(
          GraphQLString,
          "Keyset paging: a meta.end_cursor of this grouping; the page holds the groups after it.",
        ),
      },
      resolvers.aggregate(dim),
      "REST's $group/aggregate: a page of groups, each an object with the group fields and COUNT or FN_FIELD members, in order_by's order, then by the group fields.",
    );
    queryFields[`${code}_history`] = rootField(
      nn(HistoryPage),
      {
        ...idArgs,
        limit: input(GraphQLInt),
        offset: input(GraphQLInt),
        first: input(GraphQLInt, "Keyset paging: the page size (with after; not with limit or offset)."),
        after: input(GraphQLString, "The end_cursor of the page before (keyset paging)."),
      },
      resolvers.history(dim),
      "A record's revisions, newest first (REST GET /{dim}/{id}/history).",
    );
    subscriptionFields[`${code}_events`] = {
      ...rootField(
        nn(DimensionEvent),
        { event_types: input(list(nn(GraphQLString))) },
        resolvers.event(),
        `Changes of ${code} records of the caller's tenant, as they are published (GraphQL over SSE).`,
      ),
      subscribe: resolvers.events(dim),
    };

    // `extensions.writes` says what a field writes: the operation's whole write budget is checked
    // from it before its first write (src/graphql/write-budget.ts).
    const mutation = (
      args: GraphQLFieldConfigArgumentMap,
      resolve: GraphQLFieldResolver<unknown, C>,
      writes: WriteKind,
      out: GraphQLOutputType = nn(objects.result(code)),
    ): GraphQLFieldConfig<unknown, C> => ({ ...rootField(out, args, resolve), extensions: { writes } });
    const one: WriteKind = { kind: "one", dim: code };
    const createInput = writes.create ? types.createInput(dim, profile.peso) : null;
    if (createInput) {
      mutationFields[`${code}_create`] = mutation({ data: input(nn(createInput)) }, resolvers.create(dim), {
        kind: "create",
        dim: code,
      });
    }
    const updateInput = writes.update ? types.updateInput(dim, shown) : null;
    if (updateInput) {
      const update = { ...idArgs, data: input(nn(updateInput)) };
      mutationFields[`${code}_update`] = mutation(update, resolvers.update(dim, "put"), one);
      mutationFields[`${code}_patch`] = mutation(update, resolvers.update(dim, "patch"), one);
    }
    if (writes.delete) {
      mutationFields[`${code}_delete`] = mutation(
        { ...idArgs, force: { ...input(GraphQLBoolean), defaultValue: false } },
        resolvers.remove(dim),
        one,
      );
    }
    if (writes.update) {
      mutationFields[`${code}_command`] = mutation(
        { name: input(nn(GraphQLString)), ...idArgs, data: input(JSONScalar) },
        resolvers.command(dim),
        one,
      );
      mutationFields[`${code}_restore_revision`] = mutation(
        { ...idArgs, revision: input(nn(GraphQLInt)) },
        resolvers.restoreRevision(dim),
        one,
      );
    }
    if (createInput) {
      mutationFields[`${code}_batch_create`] = mutation(
        { data: input(nn(list(nn(createInput)))) },
        resolvers.batchCreate(dim),
        { kind: "batch_create", dim: code },
        nn(BatchResult),
      );
    }
  }
  if (profile.writes) {
    mutationFields.batch = {
      type: nn(list(nn(BatchOperationResult))),
      description: "POST /api/v4/core/batch: every operation or none.",
      args: { operations: input(nn(list(nn(BatchOperation)))) },
      resolve: resolvers.batch(),
      extensions: { writes: { kind: "core_batch" } satisfies WriteKind },
    };
  }

  const reads = profile.dimensions.size > 0;
  if (reads) {
    queryFields.vars = rootField(
      nn(list(nn(JSONScalar))),
      {
        field: input(nn(GraphQLString)),
        filter: input(
          GraphQLString,
          "startwith, endwith, contains, equals, and, or over the key and display fields.",
        ),
        full_list: input(GraphQLBoolean, "An AC field's whole list (getACList=1)."),
        limit: input(GraphQLInt, "At most this many values (default and maximum 1000; $num_rows)."),
        offset: input(GraphQLInt, "Values skipped, in the lookup's order ($offset): the next page."),
      },
      resolvers.vars(),
      "The values an AC or VARS field may take: {key field, display field} objects (REST GET /core/vars).",
    );
    queryFields.document = rootField(
      JSONScalar,
      {
        name: input(nn(GraphQLString)),
        key: input(nn(GraphQLString)),
        params: input(JSONScalar, 'The document\'s parameters, e.g. {codLst: "STD"}.'),
        compact: input(GraphQLBoolean),
      },
      resolvers.document(),
      "A TB_DOCUMENT document: the root record with its parts (REST GET /document/{name}/{key}).",
    );
  } else {
    queryFields._empty = {
      type: GraphQLBoolean,
      description: "No dimension is defined yet, or the caller may read none.",
      extensions: NO_EXTENSIONS,
    };
  }
  const root = (name: string, fields: GraphQLFieldConfigMap<unknown, C>) =>
    new GraphQLObjectType({ name, fields, extensions: NO_EXTENSIONS });
  return new GraphQLSchema({
    query: root("Query", queryFields),
    ...(Object.keys(mutationFields).length ? { mutation: root("Mutation", mutationFields) } : {}),
    ...(reads ? { subscription: root("Subscription", subscriptionFields) } : {}),
    extensions: NO_EXTENSIONS,
  });
}

/**
 * The full schema of `model`: every dimension, field and mutation (an administrator's profile), on
 * types of its own. What `npm run schema:print` prints; the server builds through its cache.
 */
export function buildGraphQLSchema<C>(model: MetadataModel, resolvers: SchemaResolvers<C>): GraphQLSchema {
  const profile = fullProfile(model);
  return buildProfileSchema(
    profile,
    createSharedTypes(model, resolvers, { maxComponentDimensions: model.dimensions.size }),
  );
}
