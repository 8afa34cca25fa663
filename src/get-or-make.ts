// The entry of `key` in a Map or WeakMap, made by `make` and kept when there is none yet: the one
// helper behind the per-document caches (nested by schema, model and operation name). Not for
// maps that keep `undefined` as a value.
interface Keeps<K, V> {
  get(key: K): V | undefined;
  set(key: K, value: V): unknown;
}

export function getOrMake<K, V>(map: Keeps<K, V>, key: K, make: () => V): V {
  let value = map.get(key);
  if (value === undefined) {
    value = make();
    map.set(key, value);
  }
  return value;
}
