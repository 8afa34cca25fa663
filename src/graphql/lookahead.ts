// Look-ahead: what a field's selection set asks for, walked once from the field's resolver. Named
// and inline fragments are followed, @skip/@include applied, fields merged by response key (as
// graphql-js executes them: an alias is a field of its own, the same key twice is one field), and
// every field's arguments coerced (variables and defaults applied) against the schema. A selection
// set whose arguments and directives name no variable selects what its text says: it is walked once
// per field and schema and kept (frozen), since planned execution hands every request of a document
// the same field nodes.
import {
  type FieldNode,
  type GraphQLField,
  GraphQLIncludeDirective,
  type GraphQLNamedType,
  type GraphQLOutputType,
  type GraphQLResolveInfo,
  GraphQLSkipDirective,
  getArgumentValues,
  getDirectiveValues,
  getNamedType,
  isObjectType,
  Kind,
  type SelectionNode,
  type SelectionSetNode,
} from "graphql";
import { deepFreeze } from "../deep-freeze.ts";
import { argumentsNameVariable } from "./names-variable.ts";

export interface SelectedField {
  /** The response key: the alias, or the field's name. */
  readonly key: string;
  /** The field's name in the schema. */
  readonly name: string;
  /** Its arguments, coerced (variables and defaults applied); {} for a field without any. */
  readonly args: Readonly<Record<string, unknown>>;
  /** Whether the query gave it arguments (defaults aside). */
  readonly hasArguments: boolean;
  /** What is selected under it (empty for a leaf). */
  readonly selections: readonly SelectedField[];
}

/** One walk: the field's resolve info, and whether what it read named a variable. */
interface Walk {
  readonly info: GraphQLResolveInfo;
  usesVariables: boolean;
}

/** Whether @skip/@include keep a selection. */
function included(node: SelectionNode, walk: Walk): boolean {
  if (!node.directives?.length) return true;
  if (node.directives.some((d) => argumentsNameVariable(d.arguments))) walk.usesVariables = true;
  const variables = walk.info.variableValues;
  if (getDirectiveValues(GraphQLSkipDirective, node, variables)?.if === true) return false;
  return getDirectiveValues(GraphQLIncludeDirective, node, variables)?.if !== false;
}

/** The field nodes of `sets`, grouped by response key (fragments followed). */
function collect(
  walk: Walk,
  sets: readonly SelectionSetNode[],
  out: Map<string, FieldNode[]> = new Map(),
): Map<string, FieldNode[]> {
  const { info } = walk;
  for (const set of sets) {
    for (const s of set.selections) {
      if (!included(s, walk)) continue;
      if (s.kind === Kind.FIELD) {
        const key = s.alias?.value ?? s.name.value;
        const list = out.get(key);
        if (list) list.push(s);
        else out.set(key, [s]);
      } else if (s.kind === Kind.INLINE_FRAGMENT) {
        collect(walk, [s.selectionSet], out);
      } else {
        const fragment = info.fragments[s.name.value];
        if (fragment) collect(walk, [fragment.selectionSet], out);
      }
    }
  }
  return out;
}

function selectionsOn(walk: Walk, type: GraphQLNamedType, nodes: readonly FieldNode[]): SelectedField[] {
  if (!isObjectType(type)) return [];
  const fields = type.getFields();
  const sets = nodes.flatMap((n) => (n.selectionSet ? [n.selectionSet] : []));
  const out: SelectedField[] = [];
  for (const [key, group] of collect(walk, sets)) {
    const first = group[0]!;
    const name = first.name.value;
    const def: GraphQLField<unknown, unknown> | undefined = fields[name];
    if (!def) continue; // __typename and other meta fields
    const given = first.arguments ?? [];
    if (argumentsNameVariable(given)) walk.usesVariables = true;
    out.push({
      key,
      name,
      args: given.length ? getArgumentValues(def, first, walk.info.variableValues) : {},
      hasArguments: given.length > 0,
      selections: selectionsOn(walk, getNamedType(def.type), group),
    });
  }
  return out;
}

function sameNodes(a: readonly FieldNode[], b: readonly FieldNode[]): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** What is selected under the field being resolved (createLookahead). */
export type Lookahead = (info: GraphQLResolveInfo) => readonly SelectedField[];

/**
 * What is selected under the field being resolved: one walk of its selection set, or the walk made
 * for the same field nodes and schema before when that one named no variable in an argument or a
 * directive (frozen: every request of the document shares it, whatever its variables). The walks
 * are kept by the first of their field nodes (weakly: they go with the document), with the nodes
 * and the return type (its schema's) they were made for; a field node is the document's, so its
 * fragments are the same too.
 */
export function createLookahead(): Lookahead {
  const kept = new WeakMap<
    FieldNode,
    { nodes: readonly FieldNode[]; returnType: GraphQLOutputType; selected: readonly SelectedField[] }
  >();
  return (info) => {
    const first = info.fieldNodes[0]!;
    const entry = kept.get(first);
    if (entry && entry.returnType === info.returnType && sameNodes(entry.nodes, info.fieldNodes))
      return entry.selected;
    const walk: Walk = { info, usesVariables: false };
    const selected = selectionsOn(walk, getNamedType(info.returnType), info.fieldNodes);
    if (walk.usesVariables) return selected;
    kept.set(first, { nodes: info.fieldNodes, returnType: info.returnType, selected: deepFreeze(selected) });
    return selected;
  };
}

/** The selections under every field named `name` among `fields` (all its aliases together). */
export function under(fields: readonly SelectedField[], name: string): SelectedField[] {
  return fields.filter((f) => f.name === name).flatMap((f) => f.selections);
}
