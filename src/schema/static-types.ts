// The GraphQL types every schema has whatever the metadata and the caller (PageMeta, Media, the
// batch and history types, the comparison inputs), made once per process and shared by every
// schema, and the helpers the generated types are written with. graphql-js gives each type, field,
// argument, input field and enum value its own `extensions` map unless one without a prototype is
// passed: an empty one of those is about 190 bytes, several per field, so every config here passes
// the one frozen NO_EXTENSIONS (measured: it is about half of a schema's heap; docs/benchmarks.md).
import {
  GraphQLBoolean,
  GraphQLEnumType,
  GraphQLFloat,
  type GraphQLFieldConfigArgumentMap,
  GraphQLID,
  type GraphQLInputFieldConfigMap,
  GraphQLInputObjectType,
  type GraphQLInputType,
  GraphQLInt,
  GraphQLList,
  GraphQLNonNull,
  GraphQLObjectType,
  type GraphQLOutputType,
  type GraphQLScalarType,
  GraphQLString,
} from "graphql";
import { codecOf, type GraphQLScalarName } from "../metadata/codecs.ts";
import type { DataType } from "../types.ts";
import { DateScalar, Decimal, Int64, JSONScalar, Timestamp } from "./scalars.ts";

/** The `extensions` of every generated config: empty, prototype-less, so graphql-js keeps it as is. */
export const NO_EXTENSIONS: Record<string, never> = Object.freeze(Object.create(null));

export const nn = <T extends GraphQLOutputType | GraphQLInputType>(t: T) => new GraphQLNonNull(t);
export const list = <T extends GraphQLOutputType | GraphQLInputType>(t: T) => new GraphQLList(t);

/** An argument or input field. */
export const input = (type: GraphQLInputType, description?: string) => ({
  type,
  description,
  extensions: NO_EXTENSIONS,
});

/** An output field without its own resolver. */
export const output = (type: GraphQLOutputType, description?: string) => ({
  type,
  description,
  extensions: NO_EXTENSIONS,
});

/** Output fields of one type each, by name. */
const outputs = (fields: Record<string, GraphQLOutputType>) =>
  Object.fromEntries(Object.entries(fields).map(([name, type]) => [name, output(type)]));

/** Input fields of one type each, by name. */
const inputs = (fields: Record<string, GraphQLInputType>): GraphQLInputFieldConfigMap =>
  Object.fromEntries(Object.entries(fields).map(([name, type]) => [name, input(type)]));

/** An enum whose values are their names. */
export function namesEnum(name: string, values: readonly string[], description?: string): GraphQLEnumType {
  return new GraphQLEnumType({
    name,
    description,
    extensions: NO_EXTENSIONS,
    values: Object.fromEntries(values.map((v) => [v, { value: v, extensions: NO_EXTENSIONS }])),
  });
}

export const OrderDirection = namesEnum("OrderDirection", ["asc", "desc"]);

export const DimensionEvent = new GraphQLObjectType({
  name: "DimensionEvent",
  description:
    "A change of a record, as the outbox recorded it; data holds the fields the subscriber may read in detail, or is null for an update that took the record out of the rows the subscriber sees.",
  extensions: NO_EXTENSIONS,
  fields: {
    ...outputs({
      event_id: nn(GraphQLString),
      event_type: nn(GraphQLString),
      dimension: nn(GraphQLString),
      record_id: nn(GraphQLString),
    }),
    timestamp: output(
      nn(GraphQLString),
      "When the change was recorded: ISO 8601 (UTC), as in the event's webhook delivery (its body's timestamp and X-Service-Timestamp).",
    ),
    ...outputs({ data: JSONScalar }),
  },
});

export const PageMeta = new GraphQLObjectType({
  name: "PageMeta",
  description: "total is counted only when selected.",
  extensions: NO_EXTENSIONS,
  fields: {
    ...outputs({
      total: GraphQLInt,
      num_rows: nn(GraphQLInt),
      offset: nn(GraphQLInt),
      has_more: nn(GraphQLBoolean),
    }),
    total_estimated: output(GraphQLBoolean, "true when total is the planner's estimate."),
    end_cursor: output(
      GraphQLString,
      "The cursor of the page's last row (null for an empty page): pass it as `after` for the next page of the same list.",
    ),
  },
});

const HistoryRevision = new GraphQLObjectType({
  name: "HistoryRevision",
  description:
    "One change of a record: changes holds {FIELD: {before, after}} for the fields it changed that the caller may read in detail.",
  extensions: NO_EXTENSIONS,
  fields: {
    ...outputs({ revision: nn(GraphQLInt) }),
    at: output(nn(GraphQLString), "YYYYMMDDHHmmss (UTC)."),
    user: output(nn(GraphQLString)),
    operation: output(nn(GraphQLString), "create, update, delete, state, command or restore."),
    changes: output(nn(JSONScalar)),
  },
});

export const HistoryPage = new GraphQLObjectType({
  name: "HistoryPage",
  extensions: NO_EXTENSIONS,
  fields: outputs({ data: nn(list(nn(HistoryRevision))), meta: nn(PageMeta) }),
});

export const AggregatePage = new GraphQLObjectType({
  name: "AggregatePage",
  description:
    "A page of groups (REST's $group/aggregate): data holds one object per group with the group fields and COUNT or FN_FIELD members; total (when selected) counts the groups.",
  extensions: NO_EXTENSIONS,
  fields: outputs({ data: nn(list(nn(JSONScalar))), meta: nn(PageMeta) }),
});

export const Media = new GraphQLObjectType({
  name: "Media",
  extensions: NO_EXTENSIONS,
  fields: {
    ...outputs({
      file_id: GraphQLString,
      url: GraphQLString,
      size: GraphQLFloat,
      mime_type: GraphQLString,
    }),
    uploaded_at: output(GraphQLString, "When the file was uploaded: ISO 8601 (UTC), as the upload wrote it."),
    ...outputs({ public: GraphQLBoolean }),
  },
});

const RecordError = new GraphQLObjectType({
  name: "RecordError",
  extensions: NO_EXTENSIONS,
  fields: outputs({
    error: nn(GraphQLString),
    code: nn(GraphQLString),
    message: nn(GraphQLString),
    status: nn(GraphQLInt),
    field: GraphQLString,
  }),
});

const BatchItemResult = new GraphQLObjectType({
  name: "BatchItemResult",
  extensions: NO_EXTENSIONS,
  fields: outputs({
    index: nn(GraphQLInt),
    id: GraphQLID,
    status: nn(GraphQLString),
    event_id: GraphQLString,
    error: RecordError,
  }),
});

export const BatchResult = new GraphQLObjectType({
  name: "BatchResult",
  extensions: NO_EXTENSIONS,
  fields: outputs({
    success: nn(GraphQLInt),
    failed: nn(GraphQLInt),
    results: nn(list(nn(BatchItemResult))),
  }),
});

const AggregateFunction = namesEnum("AggregateFunction", ["COUNT", "SUM", "AVG", "MIN", "MAX"]);

export const AggregateInput = new GraphQLInputObjectType({
  name: "AggregateInput",
  description: "One aggregate of REST's `aggregate` parameter; `field` is left out for COUNT(*).",
  extensions: NO_EXTENSIONS,
  fields: inputs({ fn: nn(AggregateFunction), field: GraphQLString }),
});

const BatchMethod = namesEnum("BatchMethod", ["POST", "PUT", "PATCH", "DELETE"]);

export const BatchOperation = new GraphQLInputObjectType({
  name: "BatchOperation",
  description: "One operation of POST /api/v4/core/batch; `@{ref}` in id or data names an earlier result.",
  extensions: NO_EXTENSIONS,
  fields: inputs({
    method: nn(BatchMethod),
    dim: nn(GraphQLString),
    source: GraphQLString,
    id: GraphQLID,
    ref: GraphQLString,
    force: GraphQLBoolean,
    data: JSONScalar,
  }),
});

/** A record a cascade changed with a write: REST's `cascaded` items (src/resolvers/write/present.ts). */
export const CascadedChange = new GraphQLObjectType({
  name: "CascadedChange",
  description:
    "A record that a delete or update cascade changed with the write (REST's `cascaded` items): action is deleted or updated, trec the record's TREC after the change (null after a force delete).",
  extensions: NO_EXTENSIONS,
  fields: outputs({
    dimension: nn(GraphQLString),
    id: nn(GraphQLID),
    action: nn(GraphQLString),
    trec: GraphQLString,
    event_id: nn(GraphQLString),
  }),
});

/** `cascaded` of a write's result: every change its cascades made, empty when none. */
export const cascadedField = () =>
  output(nn(list(nn(CascadedChange))), "The records cascades changed with this write; empty when none.");

export const BatchOperationResult = new GraphQLObjectType({
  name: "BatchOperationResult",
  extensions: NO_EXTENSIONS,
  fields: {
    ...outputs({
      index: nn(GraphQLInt),
      ref: GraphQLString,
      method: nn(GraphQLString),
      dim: nn(GraphQLString),
      id: GraphQLID,
      data: JSONScalar,
      event_id: GraphQLString,
    }),
    cascaded: cascadedField(),
  },
});

const GRAPHQL_SCALARS: Record<GraphQLScalarName, GraphQLScalarType> = {
  String: GraphQLString,
  Int64,
  Decimal,
  Boolean: GraphQLBoolean,
  Date: DateScalar,
  Timestamp,
  JSON: JSONScalar,
};

/** The GraphQL type of a field's values (output), by field type. */
export function scalarOf(type: DataType): GraphQLScalarType {
  return GRAPHQL_SCALARS[codecOf(type).graphqlScalar];
}

const comparisons = new Map<string, GraphQLInputObjectType>();

/** The comparison input of a field type (the REST operators of the same names), one per scalar. */
export function comparisonOf(type: DataType): GraphQLInputObjectType {
  const scalar = scalarOf(type);
  const name = type === "JSON" || type === "MEDIA" ? "Null_comparison" : `${scalar.name}_comparison`;
  let found = comparisons.get(name);
  if (!found) {
    const fields: GraphQLInputFieldConfigMap = { _is_null: input(GraphQLBoolean) };
    if (name !== "Null_comparison") {
      for (const op of ["_eq", "_ne", "_gt", "_gte", "_lt", "_lte"]) fields[op] = input(scalar);
      fields._in = input(list(nn(scalar)));
      fields._nin = input(list(nn(scalar)));
      fields._between = input(list(nn(scalar)));
      if (scalar === GraphQLString || scalar === DateScalar || scalar === Timestamp)
        fields._like = input(GraphQLString);
    }
    found = new GraphQLInputObjectType({ name, fields, extensions: NO_EXTENSIONS });
    comparisons.set(name, found);
  }
  return found;
}

/** The arguments every dimension's field takes: where the request goes, and the form it shows. */
export const contextArgs: GraphQLFieldConfigArgumentMap = {
  source: input(nn(GraphQLString), "The security area (TB_MENU node) of the request."),
  center_dett: input(
    GraphQLString,
    "The form (TB_COST context) whose field visibility applies; the user's own by default. Presentation only: it never widens what the caller's grants and row scope allow (docs/decisions.md).",
  ),
};
