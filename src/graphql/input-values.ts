// GraphQL input values as the JSON a REST body would be: what the write resolvers take.

/**
 * `value` as plain JSON data. graphql-js gives input objects without a prototype;
 * the write pipeline takes objects as JSON.parse makes them. Copied, not round-tripped through a
 * JSON string (a string and a parse per mutation field): objects and arrays are rebuilt, a field
 * whose value is undefined is left out and an undefined array item becomes null (as
 * JSON.stringify does), a `__proto__` key stays an own field (as JSON.parse keeps it), and any
 * other object (none of the schema's scalars makes one) goes through JSON as before.
 */
export function plain<T>(value: T): T {
  return (value === undefined ? value : plainValue(value)) as T;
}

function plainValue(value: unknown): unknown {
  if (value === null || typeof value !== "object") return value;
  if (Array.isArray(value)) return value.map((item) => (item === undefined ? null : plainValue(item)));
  const prototype = Object.getPrototypeOf(value);
  if (prototype !== null && prototype !== Object.prototype) return JSON.parse(JSON.stringify(value));
  const copy: Record<string, unknown> = {};
  for (const key of Object.keys(value)) {
    const item = (value as Record<string, unknown>)[key];
    if (item === undefined) continue;
    if (key === "__proto__")
      Object.defineProperty(copy, key, {
        value: plainValue(item),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    else copy[key] = plainValue(item);
  }
  return copy;
}
