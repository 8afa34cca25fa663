// REST's `filters_applied` of GET /{dim}/count: the planned filter as JSON.
import type { PlannedFilter } from "../query/types.ts";

/** The applied conditions as JSON: {FIELD: {$op: value}}; $or, $not, $and where needed. */
export function describeFilter(f: PlannedFilter | null): Record<string, unknown> {
  if (!f) return {};
  switch (f.kind) {
    case "condition":
      return { [f.field.code]: { [`$${f.op}`]: f.literal === undefined ? f.value : f.literal } };
    case "live":
      return { TREC: { $ne: "C" } };
    case "none":
      return { $none: true };
    case "search":
      return { $search: f.text };
    case "not":
      return { $not: describeFilter(f.item) };
    case "or":
      return { $or: f.items.map(describeFilter) };
    case "and": {
      // One object when the parts do not collide ({NAME: {$like}, $or: [...]}), else $and.
      const merged: Record<string, unknown> = {};
      for (const part of f.items.map(describeFilter)) {
        for (const [key, value] of Object.entries(part)) {
          const into = merged[key] as Record<string, unknown> | undefined;
          const operator = key.startsWith("$");
          if (into && (operator || Object.keys(value as object).some((op) => op in into))) {
            return { $and: f.items.map(describeFilter) };
          }
          merged[key] = operator ? value : { ...into, ...(value as object) };
        }
      }
      return merged;
    }
  }
}
