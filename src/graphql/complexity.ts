// Depth, cost and size limits of a GraphQL operation (issue 18 §3), measured before graphql-js
// validates it and long before anything runs: an operation over a limit is refused with
// QUERY_TOO_COMPLEX, and graphql-js's own rules (some quadratic in repeated fields) never see it.
//
// One walk over the document, linear in its size: each fragment is measured once, on its type
// condition, and its measure reused wherever it is spread (a chain of fragments spreading the next
// one twice costs one walk, not 2^n). What is counted:
// - `cost`: the fields the operation selects, fragments expanded, aliases and introspection
//   fields counted (GRAPHQL_MAX_COST);
// - `depth`: nested data fields (introspection excluded: its nesting is bounded by `introspection`)
//   (GRAPHQL_MAX_DEPTH);
// - `aliases`: aliased fields, fragments expanded (GRAPHQL_MAX_ALIASES);
// - `nodes`: the values the operation would resolve, estimated: every field once per object it is
//   resolved on, a list multiplying what is under it by its size: a field's `limit` argument (a
//   variable counts as the largest page, MAX_NUM_ROWS, whatever its default: the value a request
//   sends is not known here, and the measure is kept per document), else the default page
//   (DEFAULT_NUM_ROWS; a reverse relation without `limit`, what it reads per parent,
//   DEFAULT_RELATION_ROWS, whatever the list above it); an aggregate's rows (its limit) × its group fields and aggregates, and
//   `vars`'s values (MAX_LOOKUP_ITEMS) × their key and display field (GRAPHQL_MAX_NODES);
// - `introspection`: the same for introspection fields, lists sized by the schema itself (its
//   number of types, its largest number of fields per type, of arguments per field, …); allowed up
//   to twice what the full introspection query (GraphiQL's) costs on the current schema, or
//   GRAPHQL_MAX_NODES if that is more.
import {
  type DocumentNode,
  type FieldNode,
  type FragmentDefinitionNode,
  type GraphQLCompositeType,
  GraphQLError,
  type GraphQLField,
  type GraphQLNamedType,
  type GraphQLSchema,
  getIntrospectionQuery,
  getNamedType,
  getNullableType,
  isAbstractType,
  isCompositeType,
  isEnumType,
  isInputObjectType,
  isInterfaceType,
  isIntrospectionType,
  isListType,
  isObjectType,
  Kind,
  type OperationDefinitionNode,
  parse,
  SchemaMetaFieldDef,
  type SelectionSetNode,
  TypeMetaFieldDef,
  TypeNameMetaFieldDef,
  type ValueNode,
} from "graphql";
import { getOrMake } from "../get-or-make.ts";
import { MAX_JSON_DEPTH } from "../json-depth.ts";
import { DEFAULT_NUM_ROWS, DEFAULT_RELATION_ROWS, MAX_NUM_ROWS } from "../query/types.ts";
import { MAX_LOOKUP_ITEMS } from "../resolvers/read/lookup.ts";

export interface ComplexityLimits {
  maxDepth: number;
  maxCost: number;
  maxAliases: number;
  maxNodes: number;
}

/** What one operation (or selection set) asks for. */
export interface OperationMeasure {
  cost: number;
  depth: number;
  aliases: number;
  nodes: number;
  introspection: number;
  /** The deepest nesting of lists and input objects written in an argument. */
  inputDepth: number;
  /**
   * The lists of the heaviest branch of values, outermost first: what a refusal over
   * GRAPHQL_MAX_NODES names, so that the client knows which list to bound and how.
   */
  lists: SizedList[];
}

/** A list of the operation as the value estimate sized it. */
export interface SizedList {
  /** Response names from the root, `.`-separated (`PO.data.POL`). */
  path: string;
  /** The rows counted: for a nested list, per row of the list above it. */
  size: number;
  /** What set `size`: the argument as written, a variable (counted as the largest page), or no argument. */
  by: "argument" | "variable" | "default";
  /** The argument that sizes it (`limit` or `first`), when one does. */
  argument?: string;
  /** The variable given as that argument. */
  variable?: string;
}

/**
 * The most tokens a document may have: parsing stops there (QUERY_TOO_COMPLEX). Parsing costs
 * about a microsecond a token, on the event loop: 20,000 is ample for any operation within the
 * other limits (large inputs belong in variables) and keeps a refused document's parse short.
 */
export const MAX_TOKENS = 20_000;

/** Deepest nesting of `{`, `[` and `(` a document may have before it is parsed at all. */
export const MAX_SOURCE_NESTING = 256;

/**
 * The deepest nesting of brackets in a GraphQL document, outside strings and comments: one linear
 * scan, so a document nested too deep for graphql-js's recursive parser (or for the recursive
 * walks after it) is refused before any of them runs.
 */
export function sourceNesting(body: string): number {
  let depth = 0;
  let deepest = 0;
  for (let i = 0; i < body.length; i++) {
    const c = body.charCodeAt(i);
    if (c === 0x23 /* # */) {
      while (i < body.length && body.charCodeAt(i) !== 0x0a && body.charCodeAt(i) !== 0x0d) i++;
    } else if (c === 0x22 /* " */) {
      if (body.startsWith('"""', i)) {
        const end = body.indexOf('"""', i + 3);
        // An escaped triple quote (\""") inside a block string does not end it.
        let at = end;
        while (at > 0 && body.charCodeAt(at - 1) === 0x5c) at = body.indexOf('"""', at + 3);
        i = at < 0 ? body.length : at + 2;
      } else {
        for (i++; i < body.length; i++) {
          const d = body.charCodeAt(i);
          if (d === 0x5c) i++;
          else if (d === 0x22 || d === 0x0a) break;
        }
      }
    } else if (c === 0x7b || c === 0x5b || c === 0x28) {
      depth++;
      if (depth > deepest) deepest = depth;
    } else if (c === 0x7d || c === 0x5d || c === 0x29) {
      depth--;
    }
  }
  return deepest;
}

export function tooComplex(message: string, details: Record<string, unknown>): GraphQLError {
  return new GraphQLError(message, {
    extensions: { code: "QUERY_TOO_COMPLEX", status: 400, details },
  });
}

/**
 * The steps graphql-js's OverlappingFieldsCanBeMergedRule takes at most per document (its
 * MAX_COMPLEXITY_BUDGET in graphql 16.15, not exported): checking that the fields of one
 * response name in a selection set can merge compares them in pairs (and their sub-selections
 * pair by pair), so a name selected n times costs about n² steps; past the budget graphql-js stops
 * validating and answers its bare "Validation aborted." (900 `__typename` in one selection set pass
 * it, under every other limit). The budget bounds that rule's work, so nothing here measures the
 * pairs first; its abort is answered as the limit it is (`fieldMergeLimit`).
 */
export const MAX_FIELD_MERGE_STEPS = 500_000;

/** graphql-js's abort of a validation whose field-merge check spent its budget (no node: the document's). */
function isFieldMergeAbort(error: GraphQLError): boolean {
  return error.message === "Validation aborted." && error.nodes === undefined && error.path === undefined;
}

/**
 * A validation error as the client gets it: graphql-js's abort of the field-merge check as the
 * QUERY_TOO_COMPLEX refusal that names the limit passed; null for any other error.
 */
export function fieldMergeLimit(error: GraphQLError): GraphQLError | null {
  if (!isFieldMergeAbort(error)) return null;
  return tooComplex(
    `The document repeats fields of one response name too often: checking that they merge takes more than ${MAX_FIELD_MERGE_STEPS} steps, the most validation takes. Select each field once per selection set.`,
    { max_field_merge_steps: MAX_FIELD_MERGE_STEPS },
  );
}

/**
 * The heaviest branch of a selection set's lists, kept as a chain of steps cheap to extend at its
 * top (a fragment's measure, reused at every spread, is never changed): `names` are the response
 * names from the step above (or the selection set) down to this list, outermost first.
 */
interface Chain {
  names: Names;
  /** Null while the list is a page's `data`: the field above it, its page, sizes it. */
  list: Omit<SizedList, "path"> | null;
  next: Chain | null;
}
interface Names {
  name: string;
  rest: Names | null;
}

/** A selection set's measure; `deferred` is the per-item size of lists sized by the enclosing field. */
interface Measure extends Omit<OperationMeasure, "lists"> {
  deferred: number;
  /** Its heaviest branch of lists; `weight`, what the branch is chosen by among siblings. */
  chain: Chain | null;
  weight: number;
}

const zero = (): Measure => ({
  cost: 0,
  depth: 0,
  aliases: 0,
  nodes: 0,
  introspection: 0,
  deferred: 0,
  inputDepth: 0,
  chain: null,
  weight: 0,
});

function add(into: Measure, m: Measure): void {
  // The heaviest branch of the set: a page's `data` weighs its items at the default page.
  const weight = m.nodes + m.deferred * DEFAULT_NUM_ROWS;
  if (m.chain && weight > into.weight) {
    into.chain = m.chain;
    into.weight = weight;
  }
  into.cost += m.cost;
  into.depth = Math.max(into.depth, m.depth);
  into.aliases += m.aliases;
  into.nodes += m.nodes;
  into.introspection += m.introspection;
  into.deferred += m.deferred;
  into.inputDepth = Math.max(into.inputDepth, m.inputDepth);
}

/** How deep lists and input objects nest in an argument's value (iteratively: it may be deep). */
function valueDepth(value: ValueNode): number {
  let deepest = 0;
  const pending: Array<[ValueNode, number]> = [[value, 0]];
  for (let next = pending.pop(); next; next = pending.pop()) {
    const [v, depth] = next;
    if (v.kind === Kind.LIST) {
      deepest = Math.max(deepest, depth + 1);
      for (const item of v.values) pending.push([item, depth + 1]);
    } else if (v.kind === Kind.OBJECT) {
      deepest = Math.max(deepest, depth + 1);
      for (const f of v.fields) pending.push([f.value, depth + 1]);
    }
  }
  return deepest;
}

// ---------------------------------------------------------------- introspection sizes

interface SchemaSizes {
  /** The size assumed for each introspection list field, by name. */
  lists: Record<string, number>;
  /** What the full introspection query costs on this schema. */
  fullIntrospection: number;
}

const sizesBySchema = new WeakMap<GraphQLSchema, SchemaSizes>();

function schemaSizes(schema: GraphQLSchema): SchemaSizes {
  let sizes = sizesBySchema.get(schema);
  if (sizes) return sizes;
  const types = Object.values(schema.getTypeMap());
  let fields = 1;
  let inputFields = 1;
  let enumValues = 1;
  let interfaces = 1;
  let possibleTypes = 1;
  let args = 1;
  for (const type of types) {
    if (isObjectType(type) || isInterfaceType(type)) {
      const own = Object.values(type.getFields());
      fields = Math.max(fields, own.length);
      interfaces = Math.max(interfaces, type.getInterfaces().length);
      for (const f of own) args = Math.max(args, f.args.length);
    }
    if (isAbstractType(type)) possibleTypes = Math.max(possibleTypes, schema.getPossibleTypes(type).length);
    if (isInputObjectType(type)) inputFields = Math.max(inputFields, Object.keys(type.getFields()).length);
    if (isEnumType(type)) enumValues = Math.max(enumValues, type.getValues().length);
  }
  for (const d of schema.getDirectives()) args = Math.max(args, d.args.length);
  sizes = {
    lists: {
      types: types.length,
      fields,
      inputFields,
      enumValues,
      interfaces,
      possibleTypes,
      args,
      directives: Math.max(1, schema.getDirectives().length),
    },
    fullIntrospection: 0,
  };
  sizesBySchema.set(schema, sizes);
  const full = parse(
    getIntrospectionQuery({
      descriptions: true,
      specifiedByUrl: true,
      directiveIsRepeatable: true,
      schemaDescription: true,
      inputValueDeprecation: true,
      oneOf: true,
    }),
  );
  sizes.fullIntrospection = Math.max(0, ...measureDocument(schema, full).map((m) => m.measure.introspection));
  return sizes;
}

// ---------------------------------------------------------------- the walk

function fieldDef(parent: GraphQLCompositeType | null, name: string): GraphQLField<unknown, unknown> | null {
  if (name === "__typename") return TypeNameMetaFieldDef;
  if (name === "__schema") return SchemaMetaFieldDef;
  if (name === "__type") return TypeMetaFieldDef;
  if (parent && (isObjectType(parent) || isInterfaceType(parent))) return parent.getFields()[name] ?? null;
  return null;
}

/**
 * The values a request sent for an operation's variables, with the operation's defaults for those
 * it left out: what sizes its lists when they are known (the heavy-request estimate of one request).
 */
export type RequestVariables = Readonly<Record<string, unknown>>;

/**
 * A `limit` (or keyset `first`) argument's size: a literal as given; a variable, with the request's
 * values, as the value it was sent (or its default), else as the largest page whatever its default
 * (the value sent may be any page up to it; a larger one is refused when the field runs).
 */
function limitOf(node: FieldNode, variables: RequestVariables | null): number | null {
  const arg = node.arguments?.find((a) => a.name.value === "limit" || a.name.value === "first");
  if (!arg) return null;
  const value = arg.value;
  if (value.kind === Kind.INT) return Math.max(0, Number(value.value));
  if (value.kind === Kind.NULL) return DEFAULT_NUM_ROWS;
  if (value.kind === Kind.VARIABLE && variables) {
    const sent = variables[value.name.value];
    if (sent === undefined || sent === null) return DEFAULT_NUM_ROWS;
    if (Number.isSafeInteger(sent)) return Math.min(Math.max(0, sent as number), MAX_NUM_ROWS);
  }
  return MAX_NUM_ROWS;
}

/** Whether a field's size comes from a variable (its `limit` or `first`). */
function sizedByVariable(node: FieldNode): boolean {
  const arg = node.arguments?.find((a) => a.name.value === "limit" || a.name.value === "first");
  return arg?.value.kind === Kind.VARIABLE;
}

/** How a list of `size` rows was sized, for the message of a refusal. */
function sizedList(node: FieldNode, size: number): Omit<SizedList, "path"> {
  const arg = node.arguments?.find((a) => a.name.value === "limit" || a.name.value === "first");
  if (!arg || arg.value.kind === Kind.NULL) return { size, by: "default" };
  if (arg.value.kind === Kind.VARIABLE)
    return { size, by: "variable", argument: arg.name.value, variable: arg.value.name.value };
  return { size, by: "argument", argument: arg.name.value };
}

/** `names` followed by `rest`: a page's `data` (short) before the names of the list under it. */
function prepend(names: Names | null, rest: Names): Names {
  if (!names) return rest;
  return { name: names.name, rest: prepend(names.rest, rest) };
}

/** A chain's lists with their paths from the root, a page's `data` left unsized at the root. */
function flatten(chain: Chain | null): SizedList[] {
  const lists: SizedList[] = [];
  const path: string[] = [];
  for (let step = chain; step; step = step.next) {
    for (let n: Names | null = step.names; n; n = n.rest) path.push(n.name);
    if (step.list) lists.push({ path: path.join("."), ...step.list });
  }
  return lists;
}

/** A list argument's length: as written, or `bound` for a variable (a single value is a list of one). */
function listLength(node: FieldNode, name: string, bound: () => number): number {
  const value = node.arguments?.find((a) => a.name.value === name)?.value;
  if (!value || value.kind === Kind.NULL) return 0;
  if (value.kind === Kind.LIST) return value.values.length;
  if (value.kind === Kind.VARIABLE) return bound();
  return 1;
}

/** A field that groups: it takes `group_by` and `aggregate` (a generated `D_aggregate`). */
function isGrouping(def: GraphQLField<unknown, unknown>): boolean {
  return def.args.some((a) => a.name === "group_by") && def.args.some((a) => a.name === "aggregate");
}

const AGGREGATE_SUFFIX = "_aggregate";
/** COUNT, SUM, AVG, MIN, MAX: when the schema does not say. */
const MAX_AGGREGATE_FUNCTIONS = 5;
/** The key and the display field of each value `vars` answers. */
const LOOKUP_COLUMNS = 2;

class Walker {
  private readonly fragments = new Map<string, FragmentDefinitionNode>();
  private readonly measured = new Map<string, Measure>();
  private readonly inProgress = new Set<string>();

  /** Whether a list of the document is sized by a variable: its estimate then varies by request. */
  variableSized = false;

  constructor(
    private readonly schema: GraphQLSchema,
    document: DocumentNode,
    private readonly sizes: SchemaSizes | null,
    private readonly variables: RequestVariables | null = null,
  ) {
    for (const d of document.definitions) {
      if (d.kind === Kind.FRAGMENT_DEFINITION && !this.fragments.has(d.name.value))
        this.fragments.set(d.name.value, d);
    }
  }

  operation(op: OperationDefinitionNode): OperationMeasure {
    const root =
      op.operation === "query"
        ? this.schema.getQueryType()
        : op.operation === "mutation"
          ? this.schema.getMutationType()
          : this.schema.getSubscriptionType();
    const m = this.selectionSet(op.selectionSet, root ?? null);
    const { deferred, chain, weight: _, ...measure } = m;
    measure.nodes += deferred * DEFAULT_NUM_ROWS;
    return { ...measure, lists: flatten(chain) };
  }

  private selectionSet(set: SelectionSetNode, parent: GraphQLCompositeType | null): Measure {
    const total = zero();
    for (const s of set.selections) {
      if (s.kind === Kind.FIELD) add(total, this.field(s, parent));
      else if (s.kind === Kind.INLINE_FRAGMENT) {
        const type = s.typeCondition ? this.compositeType(s.typeCondition.name.value) : parent;
        add(total, this.selectionSet(s.selectionSet, type));
      } else add(total, this.fragment(s.name.value));
    }
    return total;
  }

  private compositeType(name: string): GraphQLCompositeType | null {
    const type = this.schema.getType(name);
    return type && isCompositeType(type) ? type : null;
  }

  private fragment(name: string): Measure {
    const done = this.measured.get(name);
    if (done) return done;
    const def = this.fragments.get(name);
    // An unknown or cyclic spread costs nothing here: validation refuses it.
    if (!def || this.inProgress.has(name)) return zero();
    this.inProgress.add(name);
    // Measured once for every operation of the document (nothing in a measure depends on one).
    const m = this.selectionSet(def.selectionSet, this.compositeType(def.typeCondition.name.value));
    this.inProgress.delete(name);
    this.measured.set(name, m);
    return m;
  }

  private field(node: FieldNode, parent: GraphQLCompositeType | null): Measure {
    const name = node.name.value;
    const def = fieldDef(parent, name);
    const introspection =
      name === "__schema" || name === "__type" || (parent !== null && isIntrospectionType(parent));
    const type = def ? getNullableType(def.type) : null;
    const named: GraphQLNamedType | null = def ? getNamedType(def.type) : null;
    const sub = node.selectionSet
      ? this.selectionSet(node.selectionSet, named && isCompositeType(named) ? named : null)
      : zero();
    if (sizedByVariable(node)) this.variableSized = true;
    const limit = limitOf(node, this.variables);
    // What one value of this field costs: its subfields, and the lists under it that it sizes.
    const one = sub.nodes + sub.deferred * (limit ?? DEFAULT_NUM_ROWS);
    let inputDepth = sub.inputDepth;
    for (const arg of node.arguments ?? []) inputDepth = Math.max(inputDepth, valueDepth(arg.value));
    const m: Measure = {
      inputDepth,
      cost: 1 + sub.cost,
      depth: introspection ? 0 : 1 + sub.depth,
      aliases: (node.alias ? 1 : 0) + sub.aliases,
      nodes: 0,
      introspection: 0,
      deferred: 0,
      chain: null,
      weight: 0,
    };
    const names: Names = { name: node.alias?.value ?? name, rest: null };
    // The branch under this field, its own name on top: a list it sizes is a step of its own.
    const through = (own: Omit<SizedList, "path"> | null): Chain | null => {
      const under = sub.chain;
      // A page's `data` under this field is sized by it: the page is the step, `data` leads below.
      if (under && under.list === null) {
        const next = under.next ? { ...under.next, names: prepend(under.names, under.next.names) } : null;
        return { names, list: own ?? sizedList(node, limit ?? DEFAULT_NUM_ROWS), next };
      }
      if (own) return { names, list: own, next: under };
      return under ? { ...under, names: { name: names.name, rest: under.names } } : null;
    };
    const list = type !== null && isListType(type);
    // A list that takes a `limit` of its own (a reverse relation) is sized by it, else by the
    // most it reads per parent (DEFAULT_RELATION_ROWS), never by the field above it: under
    // `CUST(limit: 1)` an `ADDR` without limit still reads up to 100 addresses per customer.
    const ownSize = def?.args.some((a) => a.name === "limit") ?? false;
    if (introspection) {
      const size = list ? Math.max(1, this.sizes?.lists[name] ?? 1) : 1;
      m.introspection = 1 + size * (one + sub.introspection);
    } else if (list && limit === null && node.selectionSet && !ownSize) {
      // A page's `data`: as many items as the enclosing field's limit.
      m.nodes = 1;
      m.deferred = one;
      m.introspection = DEFAULT_NUM_ROWS * sub.introspection;
      m.chain = { names, list: null, next: sub.chain };
    } else if (list && !node.selectionSet && def) {
      // A list of JSON objects: an aggregate's groups or `vars`'s values, counted by their members.
      m.nodes = 1 + this.jsonRows(node, def, parent, limit);
    } else if (!list && def && isGrouping(def)) {
      // A page of groups (`D_aggregate { data meta }`): its `data` is JSON objects, sized by the
      // page's own arguments (limit or first, group_by, aggregate), counted here.
      m.nodes = 1 + one + this.jsonRows(node, def, parent, limit);
      m.chain = { names, list: sizedList(node, limit ?? DEFAULT_NUM_ROWS), next: null };
    } else {
      const sized = list && node.selectionSet;
      const size = sized ? (limit ?? DEFAULT_RELATION_ROWS) : 1;
      m.nodes = 1 + size * one;
      m.introspection = size * sub.introspection;
      m.chain = through(sized ? sizedList(node, size) : null);
    }
    return m;
  }

  /**
   * The values a list without a selection set answers: an aggregate's rows (its limit) × its group
   * fields and aggregates (COUNT when none), `vars`'s values × their key and display field; of
   * any other, only the list (as before).
   */
  private jsonRows(
    node: FieldNode,
    def: GraphQLField<unknown, unknown>,
    parent: GraphQLCompositeType | null,
    limit: number | null,
  ): number {
    const name = node.name.value;
    const root = parent !== null && parent === this.schema.getQueryType();
    if (root && name === "vars") return MAX_LOOKUP_ITEMS * LOOKUP_COLUMNS;
    const aggregate = def.args.find((a) => a.name === "aggregate");
    if (!aggregate || !isGrouping(def)) return 0;
    // A list given by a variable: its members are distinct in the answer (a repeated one is
    // refused), so at most every field of the dimension, each aggregate function of each field.
    const fields = () => this.dimensionFields(parent, name);
    const functions = () => {
      const fn = getNamedType(aggregate.type);
      const of = isInputObjectType(fn) ? getNamedType(fn.getFields().fn?.type ?? fn) : null;
      return isEnumType(of) ? of.getValues().length : MAX_AGGREGATE_FUNCTIONS;
    };
    const columns =
      listLength(node, "group_by", fields) +
      Math.max(
        1,
        listLength(node, "aggregate", () => 1 + functions() * fields()),
      );
    return (limit ?? DEFAULT_NUM_ROWS) * columns;
  }

  /** The fields of the dimension of an aggregate field (`D_aggregate` → the type of `D_by_id`). */
  private dimensionFields(parent: GraphQLCompositeType | null, name: string): number {
    const byId =
      name.endsWith(AGGREGATE_SUFFIX) && parent && isObjectType(parent)
        ? parent.getFields()[`${name.slice(0, -AGGREGATE_SUFFIX.length)}_by_id`]
        : undefined;
    const type = byId ? getNamedType(byId.type) : null;
    if (type && isObjectType(type)) return Object.keys(type.getFields()).length;
    // Not a generated aggregate: at most the largest type's fields.
    return Math.max(
      1,
      ...Object.values(this.schema.getTypeMap()).map((t) =>
        isObjectType(t) || isInterfaceType(t) ? Object.keys(t.getFields()).length : 0,
      ),
    );
  }
}

/** Each operation of the document with its measure. */
export function measureDocument(
  schema: GraphQLSchema,
  document: DocumentNode,
  sizes: SchemaSizes | null = null,
): Array<{ operation: OperationDefinitionNode; measure: OperationMeasure }> {
  const walker = new Walker(schema, document, sizes ?? (sizesBySchema.get(schema) || null));
  return document.definitions
    .filter((d): d is OperationDefinitionNode => d.kind === Kind.OPERATION_DEFINITION)
    .map((operation) => ({ operation, measure: walker.operation(operation) }));
}

/**
 * The values one operation of a document may answer (its node estimate), for the heavy-request
 * lanes: with the request's variables, a list sized by a variable counts at the page it asks for.
 */
export type ValueEstimate = (
  schema: GraphQLSchema,
  document: DocumentNode,
  operationName?: string | null,
  variables?: Readonly<Record<string, unknown>> | null,
) => number;

/**
 * A ValueEstimate that measures each (schema, document) once: yoga's parser cache and the fast
 * path's prepared documents hand the same document object to every request of one text. An
 * operation with a list sized by a variable is measured again per request with the values it sent
 * (and its defaults), so that `limit: $n` with n = 20 is the small request it is: counted at the
 * largest page (as the document's refusal counts it), a typed client's every paged list would be
 * heavy and wait for its tenant's lane.
 */
export function createValueEstimate(): ValueEstimate {
  type Measured = { operations: ReturnType<typeof measureDocument>; variableSized: boolean };
  const bySchema = new WeakMap<GraphQLSchema, WeakMap<DocumentNode, Measured>>();
  return (schema, document, operationName, variables) => {
    const byDocument = getOrMake(bySchema, schema, () => new WeakMap());
    const measured = getOrMake(byDocument, document, () => {
      const walker = new Walker(schema, document, sizesBySchema.get(schema) || null);
      const operations = operationsOf(document).map((operation) => ({
        operation,
        measure: walker.operation(operation),
      }));
      return { operations, variableSized: walker.variableSized };
    });
    const one = measured.operations.find((m) => !operationName || m.operation.name?.value === operationName);
    if (!one) return 0;
    if (!measured.variableSized) return one.measure.nodes;
    const sent: Record<string, unknown> = {};
    for (const v of one.operation.variableDefinitions ?? []) {
      const name = v.variable.name.value;
      const given = variables?.[name];
      if (given !== undefined) sent[name] = given;
      else if (v.defaultValue?.kind === Kind.INT) sent[name] = Number(v.defaultValue.value);
    }
    return new Walker(schema, document, sizesBySchema.get(schema) || null, sent).operation(one.operation)
      .nodes;
  };
}

function operationsOf(document: DocumentNode): OperationDefinitionNode[] {
  return document.definitions.filter(
    (d): d is OperationDefinitionNode => d.kind === Kind.OPERATION_DEFINITION,
  );
}

/** The last response name of a path: the field as the document writes it. */
const fieldOf = (path: string) => path.slice(path.lastIndexOf(".") + 1);

/** Why a list counts as many rows as it does. */
function sizeReason(list: SizedList, nested: boolean): string {
  if (list.by === "variable")
    return `\`${list.argument}: $${list.variable}\`: a page size given as a variable counts as the largest page, ${MAX_NUM_ROWS}, whatever value is sent, as the operation is checked once for every value of its variables`;
  if (list.by === "argument") return `its \`${list.argument}\``;
  return nested
    ? `no \`limit\`: a reverse relation reads up to ${DEFAULT_RELATION_ROWS} per parent`
    : `no \`limit\`: the default page`;
}

/**
 * What a refusal over GRAPHQL_MAX_NODES adds: the lists of the heaviest branch with what sized
 * each (a variable page size counts at the largest page), and what to change so that it runs.
 */
function whyLists(lists: readonly SizedList[]): string {
  if (!lists.length) return "";
  const counted = lists
    .map((l, i) => `${l.path}: ${l.size} ${i ? "each" : "rows"} (${sizeReason(l, i > 0)})`)
    .join(" × ");
  const fixes: string[] = [];
  // Bounding a nested list first: it holds whatever page size a request sends.
  for (const [i, l] of lists.entries()) {
    if (i > 0 && l.by === "default")
      fixes.push(`give ${l.path} a \`limit\` (\`${fieldOf(l.path)}(limit: 10)\`)`);
  }
  for (const l of lists) {
    if (l.by === "variable") fixes.push(`pass the \`${l.argument}\` of ${l.path} literally`);
  }
  if (!fixes.length) {
    const largest = lists.reduce((a, b) => (b.size > a.size ? b : a));
    fixes.push(`lower the \`${largest.argument ?? "limit"}\` of ${largest.path}`);
  }
  const advice = fixes.join(", or ");
  return ` The largest lists: ${counted}. To run it, ${advice}.`;
}

const shown = (n: number) =>
  Number.isFinite(n) && n < Number.MAX_SAFE_INTEGER ? Math.round(n) : Number.MAX_SAFE_INTEGER;

/** The first limit the document's operations break, as a QUERY_TOO_COMPLEX error; null when none. */
export function checkComplexity(
  schema: GraphQLSchema,
  document: DocumentNode,
  limits: ComplexityLimits,
): GraphQLError | null {
  const sizes = schemaSizes(schema);
  const maxIntrospection = Math.max(limits.maxNodes, 2 * sizes.fullIntrospection);
  for (const { measure } of measureDocument(schema, document, sizes)) {
    const { depth, cost, aliases, nodes, introspection } = measure;
    if (depth > limits.maxDepth) {
      return tooComplex(
        `The operation is nested ${depth} levels deep; at most ${limits.maxDepth} are allowed.`,
        { depth, max_depth: limits.maxDepth },
      );
    }
    if (cost > limits.maxCost) {
      return tooComplex(
        `The operation selects ${shown(cost)} fields; at most ${limits.maxCost} are allowed.`,
        { cost: shown(cost), max_cost: limits.maxCost },
      );
    }
    if (aliases > limits.maxAliases) {
      return tooComplex(
        `The operation has ${shown(aliases)} aliased fields; at most ${limits.maxAliases} are allowed.`,
        { aliases: shown(aliases), max_aliases: limits.maxAliases },
      );
    }
    if (measure.inputDepth > MAX_JSON_DEPTH) {
      return tooComplex(
        `An argument nests lists and input objects ${measure.inputDepth} levels deep; at most ${MAX_JSON_DEPTH} are allowed.`,
        { input_depth: measure.inputDepth, max_input_depth: MAX_JSON_DEPTH },
      );
    }
    if (nodes > limits.maxNodes) {
      const { lists } = measure;
      return tooComplex(
        `The operation would resolve about ${shown(nodes)} values (lists counted at their limit); at most ${limits.maxNodes} are allowed.${whyLists(lists)}`,
        {
          nodes: shown(nodes),
          max_nodes: limits.maxNodes,
          ...(lists.length ? { path: lists[lists.length - 1]!.path, lists } : {}),
        },
      );
    }
    if (introspection > maxIntrospection) {
      return tooComplex(
        `The operation's introspection would resolve about ${shown(introspection)} values; at most ${shown(maxIntrospection)} are allowed (twice a full introspection of the schema).`,
        { introspection: shown(introspection), max_introspection: shown(maxIntrospection) },
      );
    }
  }
  return null;
}
