// The generated types of one metadata version, shared by the schemas of its access profiles
// (docs/decisions.md, "A GraphQL schema per access profile"). graphql-js lets one type object be
// part of several schemas as long as each schema has one type per name, so a type is kept under a
// key that names everything it refers to:
//   - inputs (where, order_by, update, create) by their dimension and the fields shown of it (a
//     create input by those of its INSERT_CASCADE children too), enums by their field. They refer
//     to nothing else a profile decides, and their number is bounded by the metadata: a dimension
//     has one set of shown fields per distinct COD_UTENTE of its fields, plus one.
//   - object types (a dimension's, its page's, its mutation result's) per component: a
//     dimension's type refers to its relations' types, so what two profiles can share is a whole
//     component (src/schema/profile.ts), the readable dimensions connected by relations with the
//     fields shown of each. Components are kept in an LRU weighed in dimensions.
//   - resolvers, one per dimension and field whichever schemas use them.
import {
  type GraphQLEnumType,
  type GraphQLFieldConfigArgumentMap,
  type GraphQLFieldConfigMap,
  type GraphQLFieldResolver,
  GraphQLInputObjectType,
  type GraphQLInputFieldConfigMap,
  type GraphQLInputType,
  GraphQLInt,
  GraphQLObjectType,
  GraphQLString,
} from "graphql";
import { LRUCache } from "lru-cache";
import { graphqlEnumValues } from "../metadata/validation-rules.ts";
import type { DimensionDef, FieldDef, MetadataModel } from "../types.ts";
import type { SchemaResolvers } from "./build.ts";
import {
  type Component,
  insertCascadeOf,
  type ShownDimension,
  type ShownFields,
  shownFields,
} from "./profile.ts";
import {
  cascadedField,
  comparisonOf,
  input,
  list,
  Media,
  NO_EXTENSIONS,
  namesEnum,
  nn,
  OrderDirection,
  output,
  PageMeta,
  scalarOf,
} from "./static-types.ts";

/** The object types of one component, made on first use. */
export interface ComponentTypes {
  /** The dimension's type (a record). */
  object(code: string): GraphQLObjectType;
  /** `{code}_page`: a list's data and meta. */
  page(code: string): GraphQLObjectType;
  /** `{code}_mutation_result`: a write's record, message, event and cascaded changes. */
  result(code: string): GraphQLObjectType;
}

export interface SharedTypes<C> {
  readonly model: MetadataModel;
  /** The resolvers, made once per dimension (and field, relation, mode). */
  readonly resolvers: SchemaResolvers<C>;
  /** `{dim}_where`. */
  where(dim: DimensionDef, shown: ShownFields): GraphQLInputObjectType;
  /** `{dim}_order_by`; null when no shown field sorts. */
  orderBy(dim: DimensionDef, shown: ShownFields): GraphQLInputObjectType | null;
  /** `{dim}_update_input`; null when no shown field may be sent. */
  updateInput(dim: DimensionDef, shown: ShownFields): GraphQLInputObjectType | null;
  /** `{dim}_create_input` for a caller of `peso`; null when it would have no field. */
  createInput(dim: DimensionDef, peso: number): GraphQLInputObjectType | null;
  /** The arguments of a list of `dim` (a root list and a reverse relation). */
  listArgs(shown: ShownDimension): GraphQLFieldConfigArgumentMap;
  /** The object types of `component`, kept or made. */
  component(component: Component): ComponentTypes;
  /** What is kept (tests, the bench). */
  stats(): { inputs: number; components: number; componentDimensions: number };
}

/** Resolvers made once per key: every schema sharing a type shares its resolvers too. */
function sharedResolvers<C>(made: SchemaResolvers<C>): SchemaResolvers<C> {
  const kept = new Map<string, GraphQLFieldResolver<never, C>>();
  const once = <R extends GraphQLFieldResolver<never, C>>(key: string, make: () => R): R => {
    let found = kept.get(key) as R | undefined;
    if (!found) {
      found = make();
      kept.set(key, found);
    }
    return found;
  };
  return {
    list: (dim) => once(`list\0${dim.code}`, () => made.list(dim)),
    byId: (dim) => once(`byId\0${dim.code}`, () => made.byId(dim)),
    count: (dim) => once(`count\0${dim.code}`, () => made.count(dim)),
    aggregate: (dim) => once(`aggregate\0${dim.code}`, () => made.aggregate(dim)),
    field: (dim, f) => once(`field\0${dim.code}\0${f.code}`, () => made.field(dim, f)),
    forward: (dim, r) => once(`forward\0${dim.code}\0${r.name}`, () => made.forward(dim, r)),
    reverse: (dim, r) => once(`reverse\0${dim.code}\0${r.name}`, () => made.reverse(dim, r)),
    create: (dim) => once(`create\0${dim.code}`, () => made.create(dim)),
    update: (dim, mode) => once(`update\0${dim.code}\0${mode}`, () => made.update(dim, mode)),
    remove: (dim) => once(`remove\0${dim.code}`, () => made.remove(dim)),
    batchCreate: (dim) => once(`batchCreate\0${dim.code}`, () => made.batchCreate(dim)),
    batch: () => once("batch", () => made.batch()),
    vars: () => once("vars", () => made.vars()),
    document: () => once("document", () => made.document()),
    command: (dim) => once(`command\0${dim.code}`, () => made.command(dim)),
    history: (dim) => once(`history\0${dim.code}`, () => made.history(dim)),
    restoreRevision: (dim) => once(`restoreRevision\0${dim.code}`, () => made.restoreRevision(dim)),
    events: (dim) => once(`events\0${dim.code}`, () => made.events(dim)),
    event: () => once("event", () => made.event()),
  };
}

/**
 * The enum of each field whose TB_COST.VALIDATION lists its values (create and update inputs take
 * it), named `{dim}_{field}_enum`; a field whose enum's name is taken (a dimension's code, or an
 * earlier field's enum: A_B.C and A.B_C) keeps its scalar. Names are given over the whole model,
 * in code order, so that every profile's schema names them alike.
 */
function fieldEnums(model: MetadataModel): (f: FieldDef) => GraphQLEnumType | null {
  const names = new Map<FieldDef, string>();
  const taken = new Set<string>();
  for (const dim of [...model.dimensions.values()].sort((a, b) => a.code.localeCompare(b.code))) {
    for (const f of dim.fields) {
      if (!graphqlEnumValues(f)) continue;
      const name = `${f.dim}_${f.code}_enum`;
      if (taken.has(name) || model.dimensions.has(name)) continue;
      taken.add(name);
      names.set(f, name);
    }
  }
  const made = new Map<FieldDef, GraphQLEnumType>();
  return (f) => {
    const name = names.get(f);
    if (!name) return null;
    let type = made.get(f);
    if (!type) {
      type = namesEnum(
        name,
        graphqlEnumValues(f)!,
        `The values TB_COST.VALIDATION allows for ${f.dim}.${f.code}.`,
      );
      made.set(f, type);
    }
    return type;
  };
}

export function createSharedTypes<C>(
  model: MetadataModel,
  made: SchemaResolvers<C>,
  options: { maxComponentDimensions: number },
): SharedTypes<C> {
  const resolvers = sharedResolvers(made);
  const enumOf = fieldEnums(model);
  const inputTypeOf = (f: FieldDef): GraphQLInputType => enumOf(f) ?? scalarOf(f.dataType);
  // Keyed by kind, dimension and the fields shown (bounded by the metadata: see the header).
  const inputs = new Map<string, GraphQLInputObjectType | null>();
  const keptInput = (key: string, make: () => GraphQLInputObjectType | null) => {
    if (inputs.has(key)) return inputs.get(key)!;
    const type = make();
    inputs.set(key, type);
    return type;
  };
  const components = new LRUCache<string, ComponentTypes & { size: number }>({
    maxSize: Math.max(1, options.maxComponentDimensions),
    sizeCalculation: (c) => Math.max(1, c.size),
  });

  const types: SharedTypes<C> = {
    model,
    resolvers,
    where(dim, shown) {
      return keptInput(`where\0${dim.code}\0${shown.hidden}`, () => {
        const self: GraphQLInputObjectType = new GraphQLInputObjectType({
          name: `${dim.code}_where`,
          extensions: NO_EXTENSIONS,
          fields: () => {
            const fields: GraphQLInputFieldConfigMap = {
              _and: input(list(nn(self))),
              _or: input(list(nn(self))),
              _not: input(self),
            };
            for (const f of shown.fields) fields[f.code] = input(comparisonOf(f.dataType));
            return fields;
          },
        });
        return self;
      })!;
    },
    orderBy(dim, shown) {
      return keptInput(`order\0${dim.code}\0${shown.hidden}`, () => {
        const sortable = shown.fields.filter((f) => f.dataType !== "JSON" && f.dataType !== "MEDIA");
        if (!sortable.length) return null;
        return new GraphQLInputObjectType({
          name: `${dim.code}_order_by`,
          extensions: NO_EXTENSIONS,
          fields: Object.fromEntries(sortable.map((f) => [f.code, input(OrderDirection)])),
        });
      });
    },
    updateInput(dim, shown) {
      return keptInput(`update\0${dim.code}\0${shown.hidden}`, () => {
        const sent = shown.fields.filter((f) => !f.system || f.code === "TREC");
        if (!sent.length) return null;
        return new GraphQLInputObjectType({
          name: `${dim.code}_update_input`,
          extensions: NO_EXTENSIONS,
          fields: () => Object.fromEntries(sent.map((f) => [f.code, input(inputTypeOf(f))])),
        });
      });
    },
    createInput(dim, peso) {
      // Its key names the fields shown of it and of every dimension its children lists reach.
      const reached = insertCascadeOf(model, dim);
      const key = reached.map((d) => `${d.code}:${shownFields(d, peso).hidden}`).join("\0");
      return keptInput(`create\0${key}`, () => {
        const sent = shownFields(dim, peso).fields.filter((f) => !f.system);
        const children = dim.insertCascade
          .map((code) => model.dimensions.get(code))
          .filter((child) => child !== undefined);
        if (!sent.length && !children.length) return null;
        return new GraphQLInputObjectType({
          name: `${dim.code}_create_input`,
          extensions: NO_EXTENSIONS,
          fields: () => {
            const fields: GraphQLInputFieldConfigMap = {};
            for (const f of sent) fields[f.code] = input(inputTypeOf(f));
            for (const child of children) {
              const childInput = types.createInput(child, peso);
              if (childInput) fields[child.code] = input(list(nn(childInput)));
            }
            return fields;
          },
        });
      });
    },
    listArgs({ dim, shown }) {
      const orderBy = types.orderBy(dim, shown);
      return {
        where: input(types.where(dim, shown)),
        filter: input(GraphQLString, "A REST $filter expression."),
        ...(orderBy ? { order_by: input(list(nn(orderBy))) } : {}),
        sort: input(GraphQLString, "The REST sort syntax, e.g. NAME,-CDATA."),
        limit: input(GraphQLInt, "Page size, default 100, at most 1000."),
        offset: input(GraphQLInt),
        search: input(GraphQLString, "Words to find in the records' text fields (REST $search)."),
      };
    },
    component(component) {
      let found = components.get(component.key);
      if (!found) {
        found = componentTypes(types, component);
        components.set(component.key, found);
      }
      return found;
    },
    stats: () => ({
      inputs: inputs.size,
      components: components.size,
      componentDimensions: components.calculatedSize,
    }),
  };
  return types;
}

/** The object types of a component's dimensions: each refers to its relations' (all members). */
function componentTypes<C>(types: SharedTypes<C>, component: Component): ComponentTypes & { size: number } {
  const { resolvers } = types;
  const members = new Map(component.members.map((m) => [m.dim.code, m]));
  const objects = new Map<string, GraphQLObjectType>();
  const objectOf = (code: string): GraphQLObjectType => {
    let type = objects.get(code);
    if (type) return type;
    const { dim, shown } = members.get(code)!;
    type = new GraphQLObjectType({
      name: dim.code,
      description: dim.description ?? undefined,
      extensions: NO_EXTENSIONS,
      fields: () => {
        const fields: GraphQLFieldConfigMap<Record<string, unknown>, C> = {};
        for (const f of shown.fields) {
          fields[f.code] = {
            type: f.dataType === "MEDIA" ? Media : scalarOf(f.dataType),
            description: f.description ?? undefined,
            resolve: resolvers.field(dim, f),
            extensions: NO_EXTENSIONS,
          };
        }
        // A relation is a field when the dimension at its other end is readable too (a member).
        for (const r of dim.relations) {
          if (!members.has(r.toDim)) continue;
          fields[r.name] = {
            type: objectOf(r.toDim),
            resolve: resolvers.forward(dim, r),
            extensions: NO_EXTENSIONS,
          };
        }
        for (const r of dim.reverseRelations) {
          const child = members.get(r.fromDim);
          if (!child) continue;
          fields[r.name] = {
            type: nn(list(nn(objectOf(r.fromDim)))),
            args: types.listArgs(child),
            resolve: resolvers.reverse(dim, r),
            extensions: NO_EXTENSIONS,
          };
        }
        return fields;
      },
    });
    objects.set(code, type);
    return type;
  };
  const pages = new Map<string, GraphQLObjectType>();
  const results = new Map<string, GraphQLObjectType>();
  return {
    size: component.members.length,
    object: objectOf,
    page(code) {
      let page = pages.get(code);
      if (!page) {
        page = new GraphQLObjectType({
          name: `${code}_page`,
          extensions: NO_EXTENSIONS,
          fields: { data: output(nn(list(nn(objectOf(code))))), meta: output(nn(PageMeta)) },
        });
        pages.set(code, page);
      }
      return page;
    },
    result(code) {
      let result = results.get(code);
      if (!result) {
        result = new GraphQLObjectType({
          name: `${code}_mutation_result`,
          extensions: NO_EXTENSIONS,
          fields: {
            data: output(objectOf(code)),
            message: output(nn(GraphQLString)),
            event_id: output(GraphQLString),
            cascaded: cascadedField(),
          },
        });
        results.set(code, result);
      }
      return result;
    },
  };
}
