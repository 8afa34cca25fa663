// The GraphQL schema of graphql.md, built from one metadata version. graphql-js types are made in
// loops over the dimensions (Pothos' typed builder adds nothing when every type is generated at
// run time: see docs/architecture.md). The builder is pure: the field resolvers are handed in.
import {
  GraphQLBoolean,
  GraphQLEnumType,
  GraphQLFloat,
  type GraphQLFieldConfig,
  type GraphQLFieldConfigArgumentMap,
  type GraphQLFieldConfigMap,
  type GraphQLFieldResolver,
  GraphQLID,
  GraphQLInputObjectType,
  type GraphQLInputFieldConfigMap,
  type GraphQLInputType,
  GraphQLInt,
  GraphQLList,
  GraphQLNonNull,
  GraphQLObjectType,
  type GraphQLOutputType,
  type GraphQLScalarType,
  GraphQLSchema,
  GraphQLString,
} from "graphql";
import type { DataType, DimensionDef, FieldDef, MetadataModel, Relation } from "../types.ts";
import { codecOf, type GraphQLScalarName } from "../metadata/codecs.ts";
import { graphqlEnumValues } from "../metadata/validation-rules.ts";
import { DateScalar, Decimal, Int64, JSONScalar, Timestamp } from "./scalars.ts";

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
}

const nn = <T extends GraphQLOutputType | GraphQLInputType>(t: T) => new GraphQLNonNull(t);
const list = <T extends GraphQLOutputType | GraphQLInputType>(t: T) => new GraphQLList(t);

const OrderDirection = new GraphQLEnumType({
  name: "OrderDirection",
  values: { asc: { value: "asc" }, desc: { value: "desc" } },
});

const DimensionEvent = new GraphQLObjectType({
  name: "DimensionEvent",
  description:
    "A change of a record, as the outbox recorded it; data holds the fields the subscriber may read in detail.",
  fields: {
    event_id: { type: new GraphQLNonNull(GraphQLString) },
    event_type: { type: new GraphQLNonNull(GraphQLString) },
    dimension: { type: new GraphQLNonNull(GraphQLString) },
    record_id: { type: new GraphQLNonNull(GraphQLString) },
    timestamp: { type: new GraphQLNonNull(GraphQLString) },
    data: { type: JSONScalar },
  },
});

const PageMeta = new GraphQLObjectType({
  name: "PageMeta",
  description: "total is counted only when selected.",
  fields: {
    total: { type: GraphQLInt },
    num_rows: { type: nn(GraphQLInt) },
    offset: { type: nn(GraphQLInt) },
    has_more: { type: nn(GraphQLBoolean) },
    total_estimated: { type: GraphQLBoolean, description: "true when total is the planner's estimate." },
    end_cursor: {
      type: GraphQLString,
      description:
        "The cursor of the page's last row (null for an empty page): pass it as `after` for the next page of the same list.",
    },
  },
});

const HistoryRevision = new GraphQLObjectType({
  name: "HistoryRevision",
  description:
    "One change of a record: changes holds {FIELD: {before, after}} for the fields it changed that the caller may read in detail.",
  fields: {
    revision: { type: nn(GraphQLInt) },
    at: { type: nn(GraphQLString), description: "YYYYMMDDHHmmss (UTC)." },
    user: { type: nn(GraphQLString) },
    operation: {
      type: nn(GraphQLString),
      description: "create, update, delete, state, command or restore.",
    },
    changes: { type: nn(JSONScalar) },
  },
});

const HistoryPage = new GraphQLObjectType({
  name: "HistoryPage",
  fields: { data: { type: nn(list(nn(HistoryRevision))) }, meta: { type: nn(PageMeta) } },
});

const Media = new GraphQLObjectType({
  name: "Media",
  fields: {
    file_id: { type: GraphQLString },
    url: { type: GraphQLString },
    size: { type: GraphQLFloat },
    mime_type: { type: GraphQLString },
    uploaded_at: { type: GraphQLString },
    public: { type: GraphQLBoolean },
  },
});

const RecordError = new GraphQLObjectType({
  name: "RecordError",
  fields: {
    error: { type: nn(GraphQLString) },
    code: { type: nn(GraphQLString) },
    message: { type: nn(GraphQLString) },
    status: { type: nn(GraphQLInt) },
    field: { type: GraphQLString },
  },
});

const BatchItemResult = new GraphQLObjectType({
  name: "BatchItemResult",
  fields: {
    index: { type: nn(GraphQLInt) },
    id: { type: GraphQLID },
    status: { type: nn(GraphQLString) },
    event_id: { type: GraphQLString },
    error: { type: RecordError },
  },
});

const BatchResult = new GraphQLObjectType({
  name: "BatchResult",
  fields: {
    success: { type: nn(GraphQLInt) },
    failed: { type: nn(GraphQLInt) },
    results: { type: nn(list(nn(BatchItemResult))) },
  },
});

const AggregateFunction = new GraphQLEnumType({
  name: "AggregateFunction",
  values: { COUNT: {}, SUM: {}, AVG: {}, MIN: {}, MAX: {} },
});

const AggregateInput = new GraphQLInputObjectType({
  name: "AggregateInput",
  description: "One aggregate of REST's `aggregate` parameter; `field` is left out for COUNT(*).",
  fields: { fn: { type: nn(AggregateFunction) }, field: { type: GraphQLString } },
});

const BatchMethod = new GraphQLEnumType({
  name: "BatchMethod",
  values: { POST: {}, PUT: {}, PATCH: {}, DELETE: {} },
});

const BatchOperation = new GraphQLInputObjectType({
  name: "BatchOperation",
  description: "One operation of POST /api/v4/core/batch; `@{ref}` in id or data names an earlier result.",
  fields: {
    method: { type: nn(BatchMethod) },
    dim: { type: nn(GraphQLString) },
    source: { type: GraphQLString },
    id: { type: GraphQLID },
    ref: { type: GraphQLString },
    force: { type: GraphQLBoolean },
    data: { type: JSONScalar },
  },
});

const BatchOperationResult = new GraphQLObjectType({
  name: "BatchOperationResult",
  fields: {
    index: { type: nn(GraphQLInt) },
    ref: { type: GraphQLString },
    method: { type: nn(GraphQLString) },
    dim: { type: nn(GraphQLString) },
    id: { type: GraphQLID },
    data: { type: JSONScalar },
    event_id: { type: GraphQLString },
  },
});

/** The GraphQL type of a field's values (output), by field type. */
function scalarOf(type: DataType): GraphQLScalarType {
  return GRAPHQL_SCALARS[codecOf(type).graphqlScalar];
}

const GRAPHQL_SCALARS: Record<GraphQLScalarName, GraphQLScalarType> = {
  String: GraphQLString,
  Int64,
  Decimal,
  Boolean: GraphQLBoolean,
  Date: DateScalar,
  Timestamp,
  JSON: JSONScalar,
};

/** Comparison inputs, one per scalar (the REST operators of the same names). */
function comparisonInputs() {
  const cache = new Map<string, GraphQLInputObjectType>();
  return (type: DataType): GraphQLInputObjectType => {
    const scalar = scalarOf(type);
    const name = type === "JSON" || type === "MEDIA" ? "Null_comparison" : `${scalar.name}_comparison`;
    let input = cache.get(name);
    if (!input) {
      const fields: GraphQLInputFieldConfigMap = { _is_null: { type: GraphQLBoolean } };
      if (name !== "Null_comparison") {
        for (const op of ["_eq", "_ne", "_gt", "_gte", "_lt", "_lte"]) fields[op] = { type: scalar };
        fields._in = { type: list(nn(scalar)) };
        fields._nin = { type: list(nn(scalar)) };
        fields._between = { type: list(nn(scalar)) };
        if (scalar === GraphQLString || scalar === DateScalar || scalar === Timestamp)
          fields._like = { type: GraphQLString };
      }
      input = new GraphQLInputObjectType({ name, fields });
      cache.set(name, input);
    }
    return input;
  };
}

const contextArgs: GraphQLFieldConfigArgumentMap = {
  source: { type: nn(GraphQLString), description: "The security area (TB_MENU node) of the request." },
  center_dett: {
    type: GraphQLString,
    description:
      "The form (TB_COST context) whose field visibility applies; the user's own by default. Presentation only: it never widens what the caller's grants and row scope allow (docs/decisions.md).",
  },
};

export function buildGraphQLSchema<C>(model: MetadataModel, resolvers: SchemaResolvers<C>): GraphQLSchema {
  const dims = [...model.dimensions.values()].sort((a, b) => a.code.localeCompare(b.code));
  const comparison = comparisonInputs();
  const objectTypes = new Map<string, GraphQLObjectType>();
  const whereTypes = new Map<string, GraphQLInputObjectType>();
  const orderTypes = new Map<string, GraphQLInputObjectType>();
  const createInputs = new Map<string, GraphQLInputObjectType>();
  // A field whose TB_COST.VALIDATION lists its values takes them as a GraphQL enum (one type for
  // create and update inputs); other fields keep their scalar, as does one whose enum's name is
  // taken (a dimension's code, or another field's enum: A_B.C and A.B_C).
  const fieldEnums = new Map<FieldDef, GraphQLEnumType>();
  const enumNames = new Set<string>();
  const inputTypeOf = (f: FieldDef): GraphQLInputType => {
    const values = graphqlEnumValues(f);
    if (!values) return scalarOf(f.dataType);
    let type = fieldEnums.get(f);
    if (!type) {
      const name = `${f.dim}_${f.code}_enum`;
      if (enumNames.has(name) || model.dimensions.has(name)) return scalarOf(f.dataType);
      enumNames.add(name);
      type = new GraphQLEnumType({
        name,
        description: `The values TB_COST.VALIDATION allows for ${f.dim}.${f.code}.`,
        values: Object.fromEntries(values.map((v) => [v, { value: v }])),
      });
      fieldEnums.set(f, type);
    }
    return type;
  };

  const listArgs = (dim: DimensionDef): GraphQLFieldConfigArgumentMap => ({
    where: { type: whereTypes.get(dim.code)! },
    filter: { type: GraphQLString, description: "A REST $filter expression." },
    order_by: { type: list(nn(orderTypes.get(dim.code)!)) },
    sort: { type: GraphQLString, description: "The REST sort syntax, e.g. NAME,-CDATA." },
    limit: { type: GraphQLInt, description: "Page size, default 100, at most 1000." },
    offset: { type: GraphQLInt },
    search: { type: GraphQLString, description: "Words to find in the records' text fields (REST $search)." },
  });

  for (const dim of dims) {
    whereTypes.set(
      dim.code,
      new GraphQLInputObjectType({
        name: `${dim.code}_where`,
        fields: () => {
          const self = whereTypes.get(dim.code)!;
          const fields: GraphQLInputFieldConfigMap = {
            _and: { type: list(nn(self)) },
            _or: { type: list(nn(self)) },
            _not: { type: self },
          };
          for (const f of dim.fields) fields[f.code] = { type: comparison(f.dataType) };
          return fields;
        },
      }),
    );
    orderTypes.set(
      dim.code,
      new GraphQLInputObjectType({
        name: `${dim.code}_order_by`,
        fields: Object.fromEntries(
          dim.fields
            .filter((f) => f.dataType !== "JSON" && f.dataType !== "MEDIA")
            .map((f) => [f.code, { type: OrderDirection }]),
        ),
      }),
    );
    objectTypes.set(
      dim.code,
      new GraphQLObjectType({
        name: dim.code,
        description: dim.description ?? undefined,
        fields: () => {
          const fields: GraphQLFieldConfigMap<Record<string, unknown>, C> = {};
          for (const f of dim.fields) {
            fields[f.code] = {
              type: f.dataType === "MEDIA" ? Media : scalarOf(f.dataType),
              description: f.description ?? undefined,
              resolve: resolvers.field(dim, f),
            };
          }
          for (const r of dim.relations) {
            const target = objectTypes.get(r.toDim);
            if (!target) continue;
            fields[r.name] = { type: target, resolve: resolvers.forward(dim, r) };
          }
          for (const r of dim.reverseRelations) {
            const child = model.dimensions.get(r.fromDim);
            if (!child || !objectTypes.get(r.fromDim)) continue;
            fields[r.name] = {
              type: nn(list(nn(objectTypes.get(r.fromDim)!))),
              args: listArgs(child),
              resolve: resolvers.reverse(dim, r),
            };
          }
          return fields;
        },
      }),
    );
  }

  for (const dim of dims) {
    createInputs.set(
      dim.code,
      new GraphQLInputObjectType({
        name: `${dim.code}_create_input`,
        fields: () => {
          const fields: GraphQLInputFieldConfigMap = {};
          for (const f of dim.fields) if (!f.system) fields[f.code] = { type: inputTypeOf(f) };
          for (const child of dim.insertCascade) {
            const input = createInputs.get(child);
            if (input) fields[child] = { type: list(nn(input)) };
          }
          return fields;
        },
      }),
    );
  }

  const queryFields: GraphQLFieldConfigMap<unknown, C> = {};
  const mutationFields: GraphQLFieldConfigMap<unknown, C> = {};
  const subscriptionFields: GraphQLFieldConfigMap<unknown, C> = {};
  for (const dim of dims) {
    subscriptionFields[`${dim.code}_events`] = {
      type: nn(DimensionEvent),
      description: `Changes of ${dim.code} records of the caller's tenant, as they are published (GraphQL over SSE).`,
      args: { ...contextArgs, event_types: { type: list(nn(GraphQLString)) } },
      subscribe: resolvers.events(dim),
      resolve: (payload: unknown) => payload,
    };
  }
  for (const dim of dims) {
    const type = objectTypes.get(dim.code)!;
    const page = new GraphQLObjectType({
      name: `${dim.code}_page`,
      fields: { data: { type: nn(list(nn(type))) }, meta: { type: nn(PageMeta) } },
    });
    const trecArgs: GraphQLFieldConfigArgumentMap = { cond_trec: { type: list(nn(GraphQLString)) } };
    queryFields[dim.code] = {
      type: nn(page),
      args: {
        ...contextArgs,
        ...listArgs(dim),
        first: {
          type: GraphQLInt,
          description: "Keyset paging: the page size (as limit, which it replaces), with after.",
        },
        after: {
          type: GraphQLString,
          description: "Keyset paging: a meta.end_cursor of this list; the page holds the rows after it.",
        },
        ...trecArgs,
        force_list_cost: { type: list(nn(GraphQLString)) },
      },
      resolve: resolvers.list(dim),
    };
    queryFields[`${dim.code}_by_id`] = {
      type,
      args: { ...contextArgs, id: { type: nn(GraphQLID) } },
      resolve: resolvers.byId(dim),
    };
    queryFields[`${dim.code}_count`] = {
      type: nn(GraphQLInt),
      args: {
        ...contextArgs,
        where: { type: whereTypes.get(dim.code)! },
        filter: { type: GraphQLString },
        ...trecArgs,
      },
      resolve: resolvers.count(dim),
    };

    queryFields[`${dim.code}_aggregate`] = {
      type: nn(list(nn(JSONScalar))),
      description:
        "REST's $group/aggregate: one object per group with the group fields and COUNT or FN_FIELD members.",
      args: {
        ...contextArgs,
        where: { type: whereTypes.get(dim.code)! },
        filter: { type: GraphQLString },
        group_by: { type: nn(list(nn(GraphQLString))) },
        aggregate: { type: nn(list(nn(AggregateInput))) },
        order_by: { type: GraphQLString, description: "REST sort syntax over group fields and aggregates." },
        limit: { type: GraphQLInt },
        offset: { type: GraphQLInt },
      },
      resolve: resolvers.aggregate(dim),
    };
    queryFields[`${dim.code}_history`] = {
      type: nn(HistoryPage),
      description: "A record's revisions, newest first (REST GET /{dim}/{id}/history).",
      args: {
        ...contextArgs,
        id: { type: nn(GraphQLID) },
        limit: { type: GraphQLInt },
        offset: { type: GraphQLInt },
      },
      resolve: resolvers.history(dim),
    };

    const updateInput = new GraphQLInputObjectType({
      name: `${dim.code}_update_input`,
      fields: () => {
        const fields: GraphQLInputFieldConfigMap = {};
        for (const f of dim.fields)
          if (!f.system || f.code === "TREC") fields[f.code] = { type: inputTypeOf(f) };
        return fields;
      },
    });
    const result = new GraphQLObjectType({
      name: `${dim.code}_mutation_result`,
      fields: {
        data: { type },
        message: { type: nn(GraphQLString) },
        event_id: { type: GraphQLString },
      },
    });
    // `extensions.writes` says what a field writes: the operation's whole write budget is checked
    // from it before its first write (src/graphql/write-budget.ts).
    const mutation = (
      args: GraphQLFieldConfigArgumentMap,
      resolve: GraphQLFieldResolver<unknown, C>,
      writes: WriteKind,
      out: GraphQLOutputType = nn(result),
    ): GraphQLFieldConfig<unknown, C> => ({
      type: out,
      args: { ...contextArgs, ...args },
      resolve,
      extensions: { writes },
    });
    const one: WriteKind = { kind: "one", dim: dim.code };
    mutationFields[`${dim.code}_create`] = mutation(
      { data: { type: nn(createInputs.get(dim.code)!) } },
      resolvers.create(dim),
      { kind: "create", dim: dim.code },
    );
    mutationFields[`${dim.code}_update`] = mutation(
      { id: { type: nn(GraphQLID) }, data: { type: nn(updateInput) } },
      resolvers.update(dim, "put"),
      one,
    );
    mutationFields[`${dim.code}_patch`] = mutation(
      { id: { type: nn(GraphQLID) }, data: { type: nn(updateInput) } },
      resolvers.update(dim, "patch"),
      one,
    );
    mutationFields[`${dim.code}_delete`] = mutation(
      { id: { type: nn(GraphQLID) }, force: { type: GraphQLBoolean, defaultValue: false } },
      resolvers.remove(dim),
      one,
    );
    mutationFields[`${dim.code}_command`] = mutation(
      { name: { type: nn(GraphQLString) }, id: { type: nn(GraphQLID) }, data: { type: JSONScalar } },
      resolvers.command(dim),
      one,
    );
    mutationFields[`${dim.code}_restore_revision`] = mutation(
      { id: { type: nn(GraphQLID) }, revision: { type: nn(GraphQLInt) } },
      resolvers.restoreRevision(dim),
      one,
    );
    mutationFields[`${dim.code}_batch_create`] = mutation(
      { data: { type: nn(list(nn(createInputs.get(dim.code)!))) } },
      resolvers.batchCreate(dim),
      { kind: "batch_create", dim: dim.code },
      nn(BatchResult),
    );
  }
  mutationFields.batch = {
    type: nn(list(nn(BatchOperationResult))),
    description: "POST /api/v4/core/batch: every operation or none.",
    args: { operations: { type: nn(list(nn(BatchOperation))) } },
    resolve: resolvers.batch(),
    extensions: { writes: { kind: "core_batch" } satisfies WriteKind },
  };

  if (dims.length) {
    queryFields.vars = {
      type: nn(list(nn(JSONScalar))),
      description:
        "The values an AC or VARS field may take: {key field, display field} objects (REST GET /core/vars).",
      args: {
        ...contextArgs,
        field: { type: nn(GraphQLString) },
        filter: {
          type: GraphQLString,
          description: "startwith, endwith, contains, equals, and, or over the key and display fields.",
        },
        full_list: { type: GraphQLBoolean, description: "An AC field's whole list (getACList=1)." },
      },
      resolve: resolvers.vars(),
    };
    queryFields.document = {
      type: JSONScalar,
      description:
        "A TB_DOCUMENT document: the root record with its parts (REST GET /document/{name}/{key}).",
      args: {
        ...contextArgs,
        name: { type: nn(GraphQLString) },
        key: { type: nn(GraphQLString) },
        params: { type: JSONScalar, description: 'The document\'s parameters, e.g. {codLst: "STD"}.' },
        compact: { type: GraphQLBoolean },
      },
      resolve: resolvers.document(),
    };
  }
  if (!dims.length) {
    queryFields._empty = { type: GraphQLBoolean, description: "No dimension is defined yet." };
  }
  return new GraphQLSchema({
    query: new GraphQLObjectType({ name: "Query", fields: queryFields }),
    mutation: new GraphQLObjectType({ name: "Mutation", fields: mutationFields }),
    ...(dims.length
      ? { subscription: new GraphQLObjectType({ name: "Subscription", fields: subscriptionFields }) }
      : {}),
  });
}
