// Queries and mutations run over a plan made once per document (issue 35: GraphQL speed without
// turning a request into code). graphql-js's interpreter works out, for every field of every row,
// what the document asks there (the field's definition, its type's kind, the sub-selection merged
// from the field's nodes) and builds a resolve info for it; for a page of 20 rows of 12 fields
// that is 240 times per request. The plan does that work once per (schema, document, operation
// name) — it is kept with the parsed document, which the document cache bounds — as a tree of
// plain data; at run time the rows are walked along it: each field's resolver called as graphql-js
// calls it (same arguments, same resolve info, in the same order, so loaders batch alike), each
// leaf serialized by its type. Nothing in the document becomes code: the plan holds the schema's
// own functions.
//
// The plan answers only what it answers exactly as graphql-js would: a query or a mutation whose
// selections carry no directive and whose types are object, list, non-null and leaf types, and a
// run in which nothing fails. Anything else goes to graphql-js: a document outside that subset, at
// planning; variables that do not coerce, a resolver that throws or rejects, a null where the type
// forbids it, a value a scalar cannot serialize, at run time (a query is run again by graphql-js
// from the start, which reads the same rows and answers the error as it always does). A mutation's
// root fields run one after the other, as graphql-js runs them, and cannot be run twice (they
// write): when one fails, graphql-js runs the operation over a replay of what the plan's run did —
// each root field the plan called answers what its resolver answered then (its value or its error),
// without writing again, and the rest run for the first time — so that the error, the partial data
// and the fields after it are graphql-js's own. The equivalence test
// (test/graphql/planned-execution.test.ts) runs documents both ways and compares the answers byte
// for byte.
import {
  type DocumentNode,
  type ExecutionArgs,
  type ExecutionResult,
  type FieldNode,
  type FragmentDefinitionNode,
  type GraphQLField,
  type GraphQLFieldResolver,
  type GraphQLLeafType,
  GraphQLObjectType,
  type GraphQLOutputType,
  type GraphQLResolveInfo,
  GraphQLSchema,
  defaultFieldResolver,
  type GraphQLFieldConfigMap,
  getArgumentValues,
  getOperationAST,
  getVariableValues,
  isLeafType,
  isListType,
  isNonNullType,
  isObjectType,
  Kind,
  type OperationDefinitionNode,
  type SelectionSetNode,
} from "graphql";
import { deepFreeze } from "../deep-freeze.ts";
import { getOrMake } from "../get-or-make.ts";
import { argumentsNameVariable } from "./names-variable.ts";

/** How a field's value is completed into the answer. */
type Completion =
  | { kind: "leaf"; type: GraphQLLeafType }
  | { kind: "object"; plan: SelectionPlan }
  | { kind: "list"; item: Completion }
  | { kind: "nonNull"; inner: Completion };

interface FieldPlan {
  key: string;
  nodes: FieldNode[];
  def: GraphQLField<unknown, unknown>;
  /** The field's resolver, or graphql-js's default; null for __typename. */
  resolve: GraphQLFieldResolver<unknown, unknown> | null;
  /**
   * Whether the resolver is given its resolve info (and the field its path): not for a leaf whose
   * resolver declares fewer than four parameters (the schema's field readers, `(parent) => …`),
   * which cannot read it; its value is completed by its type alone. Two objects less per value. (A
   * leaf resolver that reads its info through a rest parameter must name it: `(s, a, c, info)`.)
   */
  needsInfo: boolean;
  hasArgs: boolean;
  /**
   * The field's arguments when the document gives them without variables: coerced once, at
   * planning (graphql-js coerces literal input objects — a `where` — again for every request),
   * frozen, so that a resolver cannot change what the next request is given.
   */
  literalArgs: Record<string, unknown> | null;
  completion: Completion;
}

interface SelectionPlan {
  type: GraphQLObjectType;
  fields: FieldPlan[];
}

interface OperationPlan {
  operation: OperationDefinitionNode;
  fragments: Record<string, FragmentDefinitionNode>;
  root: SelectionPlan;
  /** A mutation's: its root fields run one after the other (graphql-js's executeFieldsSerially). */
  serial: boolean;
}

/** Thrown inside a planned run for anything graphql-js must answer itself. */
class NotPlanned extends Error {}
const NOT_PLANNED = new NotPlanned("not planned");

function selectionsOf(
  type: GraphQLObjectType,
  sets: readonly SelectionSetNode[],
  fragments: Record<string, FragmentDefinitionNode>,
): Map<string, FieldNode[]> {
  const fields = new Map<string, FieldNode[]>();
  const visited = new Set<string>();
  const collect = (set: SelectionSetNode) => {
    for (const selection of set.selections) {
      if (selection.directives?.length) throw NOT_PLANNED;
      if (selection.kind === Kind.FIELD) {
        const key = selection.alias?.value ?? selection.name.value;
        const nodes = fields.get(key);
        if (nodes) nodes.push(selection);
        else fields.set(key, [selection]);
      } else if (selection.kind === Kind.INLINE_FRAGMENT) {
        if (selection.typeCondition && selection.typeCondition.name.value !== type.name) throw NOT_PLANNED;
        collect(selection.selectionSet);
      } else {
        const name = selection.name.value;
        if (visited.has(name)) continue;
        visited.add(name);
        const fragment = fragments[name];
        if (!fragment || fragment.directives?.length) throw NOT_PLANNED;
        if (fragment.typeCondition.name.value !== type.name) throw NOT_PLANNED;
        collect(fragment.selectionSet);
      }
    }
  };
  for (const set of sets) collect(set);
  return fields;
}

function completionOf(
  type: GraphQLOutputType,
  nodes: FieldNode[],
  fragments: Record<string, FragmentDefinitionNode>,
): Completion {
  if (isNonNullType(type)) return { kind: "nonNull", inner: completionOf(type.ofType, nodes, fragments) };
  if (isListType(type)) return { kind: "list", item: completionOf(type.ofType, nodes, fragments) };
  if (isLeafType(type)) return { kind: "leaf", type };
  if (isObjectType(type) && !type.isTypeOf) {
    const sets = nodes.flatMap((node) => (node.selectionSet ? [node.selectionSet] : []));
    return { kind: "object", plan: selectionPlan(type, sets, fragments) };
  }
  throw NOT_PLANNED; // interfaces and unions: graphql-js resolves their runtime type
}

/** A leaf, or a non-null leaf: completed by its type's serializer, without a path. */
function isLeafCompletion(completion: Completion): boolean {
  return completion.kind === "leaf" || (completion.kind === "nonNull" && completion.inner.kind === "leaf");
}

/** A field's coerced arguments if none of them refers to a variable; null if one does (or they do not coerce). */
function literalArguments(
  def: GraphQLField<unknown, unknown>,
  node: FieldNode,
): Record<string, unknown> | null {
  if (argumentsNameVariable(node.arguments)) return null;
  try {
    return deepFreeze(getArgumentValues(def, node, {}));
  } catch {
    return null; // coerced per request, which answers it
  }
}

function selectionPlan(
  type: GraphQLObjectType,
  sets: readonly SelectionSetNode[],
  fragments: Record<string, FragmentDefinitionNode>,
): SelectionPlan {
  const fields: FieldPlan[] = [];
  const defs = type.getFields();
  for (const [key, nodes] of selectionsOf(type, sets, fragments)) {
    const name = nodes[0]!.name.value;
    if (key === "__proto__") throw NOT_PLANNED; // an alias a plain object cannot hold as a key
    if (name === "__typename") {
      fields.push({
        key,
        nodes,
        def: null as never,
        resolve: null,
        needsInfo: false,
        hasArgs: false,
        literalArgs: null,
        completion: null as never,
      });
      continue;
    }
    if (name.startsWith("__")) throw NOT_PLANNED; // introspection
    const def = defs[name];
    if (!def) throw NOT_PLANNED;
    const resolve = def.resolve ?? defaultFieldResolver;
    const completion = completionOf(def.type, nodes, fragments);
    fields.push({
      key,
      nodes,
      def,
      resolve,
      needsInfo: resolve.length >= 4 || !isLeafCompletion(completion),
      hasArgs: def.args.length > 0,
      literalArgs: def.args.length > 0 ? literalArguments(def, nodes[0]!) : null,
      completion,
    });
  }
  return { type, fields };
}

function operationPlan(
  schema: GraphQLSchema,
  document: DocumentNode,
  operationName?: string | null,
): OperationPlan | null {
  const operation = getOperationAST(document, operationName);
  if (!operation) return null;
  const root =
    operation.operation === "query"
      ? schema.getQueryType()
      : operation.operation === "mutation"
        ? schema.getMutationType()
        : null;
  if (!root) return null;
  const fragments: Record<string, FragmentDefinitionNode> = Object.create(null);
  for (const definition of document.definitions)
    if (definition.kind === Kind.FRAGMENT_DEFINITION) fragments[definition.name.value] = definition;
  try {
    return {
      operation,
      fragments,
      root: selectionPlan(root, [operation.selectionSet], fragments),
      serial: operation.operation === "mutation",
    };
  } catch (err) {
    if (err instanceof NotPlanned) return null;
    throw err;
  }
}

interface Path {
  prev: Path | undefined;
  key: string | number;
  typename: string | undefined;
}

/** What one run shares: the arguments of execute and the coerced variables. */
interface Run {
  schema: GraphQLSchema;
  plan: OperationPlan;
  context: unknown;
  rootValue: unknown;
  variables: Record<string, unknown>;
  signal: AbortSignal | undefined;
}

function isPromiseLike(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as PromiseLike<unknown> | null)?.then === "function";
}

function resolveInfo(
  run: Run,
  field: FieldPlan,
  parentType: GraphQLObjectType,
  path: Path,
): GraphQLResolveInfo {
  return {
    fieldName: field.def.name,
    fieldNodes: field.nodes,
    returnType: field.def.type,
    parentType,
    path,
    schema: run.schema,
    fragments: run.plan.fragments,
    rootValue: run.rootValue,
    operation: run.plan.operation,
    variableValues: run.variables,
    signal: run.signal,
  } as GraphQLResolveInfo;
}

/** Promises of a run given up on: their outcome no longer matters, and must not go unhandled. */
function abandon(pending: Promise<unknown>[] | null) {
  if (pending) for (const p of pending) p.catch(() => {});
}

const NO_ARGS = Object.freeze(Object.create(null)) as Record<string, unknown>;
/** What a leaf's resolver that declares no info parameter is given in its place (it cannot read it). */
const NO_INFO = undefined as unknown as GraphQLResolveInfo;
const NO_PATH: Path = Object.freeze({ prev: undefined, key: "", typename: undefined });

/** The completed value, or a promise of it; throws NOT_PLANNED for anything graphql-js answers. */
function complete(run: Run, completion: Completion, value: unknown, path: Path): unknown {
  if (isPromiseLike(value)) return Promise.resolve(value).then((v) => complete(run, completion, v, path));
  if (completion.kind === "nonNull") {
    if (value === null || value === undefined) throw NOT_PLANNED;
    return complete(run, completion.inner, value, path);
  }
  if (value === null || value === undefined) return null;
  switch (completion.kind) {
    case "leaf": {
      const out = completion.type.serialize(value);
      if (out === undefined) throw NOT_PLANNED;
      return out;
    }
    case "object":
      return fieldsOf(run, completion.plan, value, path);
    case "list": {
      if (!Array.isArray(value)) throw NOT_PLANNED;
      const out: unknown[] = new Array(value.length);
      let pending: Promise<unknown>[] | null = null;
      try {
        for (let i = 0; i < value.length; i++) {
          const item = complete(run, completion.item, value[i], { prev: path, key: i, typename: undefined });
          out[i] = item;
          if (item instanceof Promise) {
            if (!pending) pending = [];
            pending.push(
              item.then((v) => {
                out[i] = v;
              }),
            );
          }
        }
      } catch (err) {
        abandon(pending);
        throw err;
      }
      return pending ? Promise.all(pending).then(() => out) : out;
    }
  }
}

/** A field's arguments: coerced once at planning when literal, else from this run's variables. */
function argumentsOf(run: Run, field: FieldPlan): Record<string, unknown> {
  return (
    field.literalArgs ??
    (field.hasArgs ? getArgumentValues(field.def, field.nodes[0]!, run.variables) : NO_ARGS)
  );
}

/** A selection on one object (the root value or a row): its fields in the document's order. */
function fieldsOf(run: Run, plan: SelectionPlan, source: unknown, path: Path | undefined): unknown {
  // A plain object (graphql-js makes them without a prototype): V8 serializes these a third
  // faster, to the same text. No key is __proto__ (planning refuses it).
  const out: Record<string, unknown> = {};
  let pending: Promise<unknown>[] | null = null;
  try {
    for (const field of plan.fields) {
      if (!field.resolve) {
        out[field.key] = plan.type.name;
        continue;
      }
      const args = argumentsOf(run, field);
      let value: unknown;
      if (field.needsInfo) {
        const at: Path = { prev: path, key: field.key, typename: plan.type.name };
        value = complete(
          run,
          field.completion,
          field.resolve(source, args, run.context, resolveInfo(run, field, plan.type, at)),
          at,
        );
      } else {
        // A leaf's completion reads no path (a failure goes back to graphql-js, which makes its own).
        value = complete(run, field.completion, field.resolve(source, args, run.context, NO_INFO), NO_PATH);
      }
      out[field.key] = value;
      if (value instanceof Promise) {
        if (!pending) pending = [];
        pending.push(
          value.then((v) => {
            out[field.key] = v;
          }),
        );
      }
    }
  } catch (err) {
    abandon(pending);
    throw err;
  }
  return pending ? Promise.all(pending).then(() => out) : out;
}

/** What a root field's resolver answered in a planned run of a mutation. */
type Outcome = { value: unknown } | { error: unknown };

/** The root value of a mutation's replay: what the planned run's root fields answered, by key. */
interface Replay {
  rootValue: unknown;
  outcomes: Map<string, Outcome>;
}

/**
 * A mutation's root fields one after the other, each completed before the next is resolved, as
 * graphql-js runs them; each resolver's outcome is kept in `outcomes` before its value is
 * completed, so that a failure can be replayed (`replaySchemaOf`) without writing again.
 */
async function rootFieldsInSeries(
  run: Run,
  plan: SelectionPlan,
  outcomes: Map<string, Outcome>,
): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  for (const field of plan.fields) {
    if (!field.resolve) {
      out[field.key] = plan.type.name;
      continue;
    }
    const args = argumentsOf(run, field);
    const at: Path = { prev: undefined, key: field.key, typename: plan.type.name };
    let value: unknown;
    try {
      value = await field.resolve(run.rootValue, args, run.context, resolveInfo(run, field, plan.type, at));
    } catch (error) {
      outcomes.set(field.key, { error });
      throw NOT_PLANNED;
    }
    outcomes.set(field.key, { value });
    out[field.key] = await complete(run, field.completion, value, at);
  }
  return out;
}

/**
 * The schema a failed planned mutation is replayed on: the same types, and a mutation type whose
 * root fields answer what the planned run's resolvers answered (the root value is a `Replay`),
 * and run their own resolver on the original root value where the planned run did not reach them.
 */
function replaySchemaOf(schema: GraphQLSchema): GraphQLSchema {
  const mutation = schema.getMutationType()!;
  const config = mutation.toConfig();
  const fields: GraphQLFieldConfigMap<Replay, unknown> = {};
  for (const [name, field] of Object.entries(config.fields)) {
    const resolve = field.resolve ?? defaultFieldResolver;
    fields[name] = {
      ...field,
      resolve: (replay, args, context, info) => {
        const outcome = replay.outcomes.get(info.path.key as string);
        if (!outcome) return resolve(replay.rootValue, args, context, info);
        if ("error" in outcome) throw outcome.error;
        return outcome.value;
      },
    };
  }
  const schemaConfig = schema.toConfig();
  return new GraphQLSchema({
    ...schemaConfig,
    types: schemaConfig.types.filter((type) => type !== mutation),
    mutation: new GraphQLObjectType({ ...config, fields }),
  });
}

export type ExecuteFn = (args: ExecutionArgs) => unknown;

/**
 * Runs an operation: planned queries and mutations here, every other operation and every planned
 * run that meets anything graphql-js must answer by `fallback` (graphql-js's interpreter). Plans
 * are kept per schema and document (weakly: they go with either).
 */
export type PlannedExecution = (args: ExecutionArgs, fallback: ExecuteFn) => unknown;

export type ExecutedBy = "plan" | "interpreter" | "plan_then_interpreter";

export function plannedExecution(executed: (by: ExecutedBy) => void = () => {}): PlannedExecution {
  const plans = new WeakMap<GraphQLSchema, WeakMap<DocumentNode, Map<string, OperationPlan | null>>>();
  const replaySchemas = new WeakMap<GraphQLSchema, GraphQLSchema>();

  /** A mutation: planned, and on a failure replayed by graphql-js over what its run did. */
  const mutate = (args: ExecutionArgs, run: Run, fallback: ExecuteFn): Promise<unknown> => {
    const outcomes = new Map<string, Outcome>();
    return rootFieldsInSeries(run, run.plan.root, outcomes).then(
      (data) => {
        executed("plan");
        return { data } as ExecutionResult;
      },
      () => {
        executed("plan_then_interpreter");
        if (!outcomes.size) return fallback(args);
        const replay: Replay = { rootValue: args.rootValue, outcomes };
        const schema = getOrMake(replaySchemas, args.schema, () => replaySchemaOf(args.schema));
        return fallback({ ...args, schema, rootValue: replay });
      },
    );
  };
  const planOf = (args: ExecutionArgs): OperationPlan | null => {
    const bySchema = getOrMake(plans, args.schema, () => new WeakMap());
    const byName = getOrMake(bySchema, args.document, () => new Map<string, OperationPlan | null>());
    const name = args.operationName ?? "";
    let plan = byName.get(name);
    if (plan === undefined) {
      plan = operationPlan(args.schema, args.document, args.operationName);
      byName.set(name, plan);
    }
    return plan;
  };

  return (args, fallback) => {
    const plan = planOf(args);
    if (!plan) {
      executed("interpreter");
      return fallback(args);
    }
    const coerced = getVariableValues(
      args.schema,
      plan.operation.variableDefinitions ?? [],
      (args.variableValues ?? {}) as Record<string, unknown>,
    );
    if (coerced.errors) {
      executed("interpreter");
      return fallback(args);
    }
    const run: Run = {
      schema: args.schema,
      plan,
      context: args.contextValue,
      rootValue: args.rootValue,
      variables: coerced.coerced,
      signal: (args as { signal?: AbortSignal }).signal,
    };
    if (plan.serial) return mutate(args, run, fallback);
    let data: unknown;
    try {
      data = fieldsOf(run, plan.root, args.rootValue, undefined);
    } catch {
      // NOT_PLANNED, or a resolver's error: graphql-js answers it (a field error, partial data).
      executed("plan_then_interpreter");
      return fallback(args);
    }
    if (!(data instanceof Promise)) {
      executed("plan");
      return { data } as ExecutionResult;
    }
    return data.then(
      (value) => {
        executed("plan");
        return { data: value } as ExecutionResult;
      },
      () => {
        executed("plan_then_interpreter");
        return fallback(args);
      },
    );
  };
}
