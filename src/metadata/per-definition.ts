// What is worked out of a dimension's definition once: definitions are immutable, one per
// metadata version (a change builds new ones), so a value kept per definition object is current
// as long as the definition is in use, and goes with it.
import type { DimensionDef } from "../types.ts";

/** `derive`, computed once per dimension definition. */
export function perDefinition<T>(derive: (dim: DimensionDef) => T): (dim: DimensionDef) => T {
  const kept = new WeakMap<DimensionDef, T>();
  return (dim) => {
    if (kept.has(dim)) return kept.get(dim) as T;
    const value = derive(dim);
    kept.set(dim, value);
    return value;
  };
}
