// A mutation's whole write budget, checked before its first write (issue 35 §6). A GraphQL
// operation's mutation fields run one after another and share one budget (the records of
// MAX_BATCH_SIZE, the event bytes of REQUEST_EVENTS_MAX_BYTES: src/resolvers/write/context.ts).
// Spent field by field only, an operation over it wrote its first fields, then failed the next,
// and — a mutation field being non-null — answered `data: null`, hiding what it had committed.
// Here the operation's root fields are read with their coerced arguments before anything runs:
// the records each would write (a create with its INSERT_CASCADE children, each item of a batch,
// one per update, delete or command) and the bytes of the string values it writes (a lower bound
// of its events' payloads, which carry every value written). An operation over either bound is
// refused whole (413 PAYLOAD_TOO_LARGE) and writes nothing. The exact event bytes are still
// spent as each write is made; should they still run out (values a template or default makes),
// the refusal names the fields committed before it (`extensions.committed`).
import {
  type DocumentNode,
  type FieldNode,
  type FragmentDefinitionNode,
  type GraphQLSchema,
  GraphQLSkipDirective,
  GraphQLIncludeDirective,
  getArgumentValues,
  getDirectiveValues,
  getOperationAST,
  getVariableValues,
  Kind,
  type OperationDefinitionNode,
  type SelectionSetNode,
} from "graphql";
import { PayloadTooLargeError } from "../errors.ts";
import { getOrMake } from "../get-or-make.ts";
import { recordsInCreate } from "../resolvers/write/pipeline.ts";
import type { WriteKind } from "../schema/build.ts";
import type { MetadataModel } from "../types.ts";

export interface PlannedWrites {
  records: number;
  /** Bytes of the string values the operation writes: its events are at least this large. */
  stringBytes: number;
}

type Variables = Record<string, unknown>;

function included(node: FieldNode | { directives?: FieldNode["directives"] }, variables: Variables): boolean {
  const skip = getDirectiveValues(GraphQLSkipDirective, node, variables);
  if (skip?.if === true) return false;
  const include = getDirectiveValues(GraphQLIncludeDirective, node, variables);
  return include?.if !== false;
}

/** The root fields an operation selects, fragments followed (each fragment once). */
function rootFields(
  selectionSet: SelectionSetNode,
  fragments: Map<string, FragmentDefinitionNode>,
  variables: Variables,
  seen = new Set<string>(),
  out: FieldNode[] = [],
): FieldNode[] {
  for (const selection of selectionSet.selections) {
    if (!included(selection, variables)) continue;
    if (selection.kind === Kind.FIELD) out.push(selection);
    else if (selection.kind === Kind.INLINE_FRAGMENT)
      rootFields(selection.selectionSet, fragments, variables, seen, out);
    else if (!seen.has(selection.name.value)) {
      seen.add(selection.name.value);
      const fragment = fragments.get(selection.name.value);
      if (fragment) rootFields(fragment.selectionSet, fragments, variables, seen, out);
    }
  }
  return out;
}

/** A document's fragment definitions by name. */
function fragmentsOf(document: DocumentNode): Map<string, FragmentDefinitionNode> {
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const definition of document.definitions)
    if (definition.kind === Kind.FRAGMENT_DEFINITION) fragments.set(definition.name.value, definition);
  return fragments;
}

/** The response keys of `document`'s `operation`'s root fields, in the order they run. */
export function rootFieldKeys(
  document: DocumentNode,
  operation: OperationDefinitionNode,
  variables: Variables,
): string[] {
  const keys = rootFields(operation.selectionSet, fragmentsOf(document), variables).map(
    (f) => f.alias?.value ?? f.name.value,
  );
  return [...new Set(keys)];
}

/** UTF-8 bytes of every string in `value` (keys not counted), to a bounded depth. */
function stringBytes(value: unknown, depth = 0): number {
  if (typeof value === "string") return Buffer.byteLength(value);
  if (depth > 16 || value === null || typeof value !== "object") return 0;
  let n = 0;
  for (const item of Array.isArray(value) ? value : Object.values(value)) n += stringBytes(item, depth + 1);
  return n;
}

/** The writes a document's mutation would make (createPlannedWrites). */
export type PlannedWritesOf = (
  schema: GraphQLSchema,
  model: MetadataModel,
  document: DocumentNode,
  operationName: string | null | undefined,
  rawVariables: Variables | null | undefined,
) => PlannedWrites | null;

/**
 * The writes `document`'s mutation would make; null when it is no mutation or its variables do not
 * coerce (graphql-js then refuses it before anything runs). A mutation without variables is
 * worked out once per document, schema, metadata version and operation name and kept (frozen;
 * weakly: it goes with the document, the schema or the model): what it writes is in its text, so
 * a document sent again is not coerced again.
 */
export function createPlannedWrites(): PlannedWritesOf {
  const withoutVariables = new WeakMap<
    DocumentNode,
    WeakMap<GraphQLSchema, WeakMap<MetadataModel, Map<string, PlannedWrites | null>>>
  >();
  return (schema, model, document, operationName, rawVariables) => {
    const operation = getOperationAST(document, operationName ?? undefined);
    if (operation?.operation !== "mutation" || !schema.getMutationType()) return null;
    if (operation.variableDefinitions?.length)
      return writesOf(schema, model, document, operation, rawVariables);
    const bySchema = getOrMake(withoutVariables, document, () => new WeakMap());
    const byModel = getOrMake(bySchema, schema, () => new WeakMap());
    const kept = getOrMake(byModel, model, () => new Map<string, PlannedWrites | null>());
    return getOrMake(kept, operationName ?? "", () => {
      const made = writesOf(schema, model, document, operation, undefined);
      return made && Object.freeze(made);
    });
  };
}

function writesOf(
  schema: GraphQLSchema,
  model: MetadataModel,
  document: DocumentNode,
  operation: OperationDefinitionNode,
  rawVariables: Variables | null | undefined,
): PlannedWrites | null {
  const mutationType = schema.getMutationType()!;
  const coerced = getVariableValues(schema, operation.variableDefinitions ?? [], rawVariables ?? {}, {
    maxErrors: 1,
  });
  if (coerced.errors) return null;
  const variables = coerced.coerced;
  const fragments = fragmentsOf(document);

  const planned: PlannedWrites = { records: 0, stringBytes: 0 };
  for (const node of rootFields(operation.selectionSet, fragments, variables)) {
    const field = mutationType.getFields()[node.name.value];
    const writes = field?.extensions?.writes as WriteKind | undefined;
    if (!field || !writes) continue;
    let args: Record<string, unknown>;
    try {
      args = getArgumentValues(field, node, variables);
    } catch {
      return null; // graphql-js refuses the field with the same error when it runs
    }
    if (writes.kind === "create") {
      planned.records += recordsInCreate(model, writes.dim, args.data);
    } else if (writes.kind === "batch_create") {
      const items = Array.isArray(args.data) ? args.data : [];
      for (const item of items) planned.records += recordsInCreate(model, writes.dim, item);
    } else if (writes.kind === "one") {
      planned.records += 1;
    } else {
      const operations = Array.isArray(args.operations) ? args.operations : [];
      for (const op of operations) {
        const o = op as { method?: unknown; dim?: unknown; data?: unknown };
        const dim = typeof o.dim === "string" ? o.dim : "";
        planned.records += o.method === "POST" ? recordsInCreate(model, dim, o.data) : 1;
      }
    }
    planned.stringBytes += stringBytes(args.data ?? args.operations);
  }
  return planned;
}

/** 413 before anything is written when `planned` exceeds the request's bounds. */
export function checkPlannedWrites(
  planned: PlannedWrites,
  limits: { maxBatchSize: number; requestEventsMaxBytes: number },
): void {
  if (planned.records > limits.maxBatchSize) {
    throw new PayloadTooLargeError(
      `A request writes at most ${limits.maxBatchSize} records, cascaded children included; this operation's mutation fields hold ${planned.records}. Nothing was written.`,
      { max_batch_size: limits.maxBatchSize, count: planned.records },
    );
  }
  if (planned.stringBytes > limits.requestEventsMaxBytes) {
    throw new PayloadTooLargeError(
      `The events of this operation would exceed ${limits.requestEventsMaxBytes} bytes (its values alone are ${planned.stringBytes}); write fewer or smaller records per request. Nothing was written.`,
      { max_event_bytes: limits.requestEventsMaxBytes, value_bytes: planned.stringBytes },
    );
  }
}
