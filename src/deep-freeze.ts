// A value frozen through and through (objects and arrays, not only the top): what a cache hands to
// every request it serves must not be changed by one of them.
export function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const item of Object.values(value)) deepFreeze(item);
  }
  return value;
}
