// Depth and cost limits, checked as a validation rule: an over-deep or over-wide operation is
// refused with QUERY_TOO_COMPLEX before anything runs. Cost is the number of fields the operation
// would resolve per parent, fragments expanded and aliases counted (an alias is another field),
// so `a1: CUST(…) a2: CUST(…)` costs twice what one does.
import {
  type ASTVisitor,
  type FragmentDefinitionNode,
  GraphQLError,
  Kind,
  type SelectionSetNode,
  type ValidationContext,
} from "graphql";

export interface ComplexityLimits {
  maxDepth: number;
  maxCost: number;
}

function tooComplex(message: string, details: Record<string, number>): GraphQLError {
  return new GraphQLError(message, {
    extensions: { code: "QUERY_TOO_COMPLEX", status: 400, details },
  });
}

function measure(
  set: SelectionSetNode,
  fragments: Record<string, FragmentDefinitionNode>,
  depth: number,
  seen: Set<string>,
): { depth: number; cost: number } {
  let maxDepth = depth;
  let cost = 0;
  for (const s of set.selections) {
    if (s.kind === Kind.FIELD) {
      if (s.name.value.startsWith("__")) continue;
      cost += 1;
      if (s.selectionSet) {
        const inner = measure(s.selectionSet, fragments, depth + 1, seen);
        maxDepth = Math.max(maxDepth, inner.depth);
        cost += inner.cost;
      }
    } else {
      const inner =
        s.kind === Kind.INLINE_FRAGMENT
          ? s.selectionSet
          : seen.has(s.name.value)
            ? null
            : fragments[s.name.value]?.selectionSet;
      if (!inner) continue;
      const nextSeen = s.kind === Kind.FRAGMENT_SPREAD ? new Set([...seen, s.name.value]) : seen;
      const m = measure(inner, fragments, depth, nextSeen);
      maxDepth = Math.max(maxDepth, m.depth);
      cost += m.cost;
    }
  }
  return { depth: maxDepth, cost };
}

export function complexityRule(limits: ComplexityLimits) {
  return (context: ValidationContext): ASTVisitor => ({
    OperationDefinition(node) {
      const fragments: Record<string, FragmentDefinitionNode> = {};
      for (const d of context.getDocument().definitions) {
        if (d.kind === Kind.FRAGMENT_DEFINITION) fragments[d.name.value] = d;
      }
      const { depth, cost } = measure(node.selectionSet, fragments, 1, new Set());
      if (depth > limits.maxDepth) {
        context.reportError(
          tooComplex(
            `The operation is nested ${depth} levels deep; at most ${limits.maxDepth} are allowed.`,
            {
              depth,
              max_depth: limits.maxDepth,
            },
          ),
        );
      } else if (cost > limits.maxCost) {
        context.reportError(
          tooComplex(`The operation selects ${cost} fields; at most ${limits.maxCost} are allowed.`, {
            cost,
            max_cost: limits.maxCost,
          }),
        );
      }
    },
  });
}
