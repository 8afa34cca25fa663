// Response bodies of the read routes, serialised by fast-json-stringify functions compiled from the
// metadata: one per dimension, field set and expansion, cached by metadata version. The cache is
// bounded (field sets come from requests) and belongs to the app instance that created it.
import build from "fast-json-stringify";
import { codecOf } from "../../metadata/codecs.ts";
import type { DataType, FieldDef } from "../../types.ts";
import type { GroupShape, ListResult, RecordResult, RecordShape } from "../../resolvers/read/types.ts";

type Schema = Record<string, unknown>;
type Serializer = (doc: unknown) => string;

const ANY: Schema = {};

function valueSchema(type: DataType): Schema {
  return codecOf(type).responseSchema;
}

function fieldProperties(fields: readonly FieldDef[]): Schema {
  const props: Schema = {};
  for (const f of fields) props[f.code] = valueSchema(f.dataType);
  return props;
}

function recordSchema(shape: RecordShape): Schema {
  const properties = fieldProperties(shape.fields);
  for (const e of shape.expand) {
    const item = recordSchema(e.shape);
    properties[e.name] = e.many ? { type: "array", items: item } : { ...item, nullable: true };
  }
  return { type: "object", properties };
}

function groupSchema(shape: GroupShape): Schema {
  const properties = fieldProperties(shape.groupBy);
  for (const a of shape.aggregates) {
    const minMax = (a.fn === "MIN" || a.fn === "MAX") && a.field;
    properties[a.alias] =
      minMax && a.field ? valueSchema(a.field.dataType) : { type: "number", nullable: true };
  }
  return { type: "object", properties };
}

const META: Schema = {
  type: "object",
  properties: {
    total: { type: "integer", nullable: true },
    num_rows: { type: "integer" },
    offset: { type: "integer" },
    has_more: { type: "boolean" },
    total_estimated: { type: "boolean" },
  },
};

function shapeKey(shape: RecordShape): string {
  const expand = shape.expand.map((e) => `${e.name}${e.many ? "*" : ""}(${shapeKey(e.shape)})`).join(";");
  return `${shape.dim}:${shape.fields.map((f) => f.code).join(",")}[${expand}]`;
}

function groupKey(shape: GroupShape): string {
  return `${shape.dim}:${shape.groupBy.map((f) => f.code).join(",")}|${shape.aggregates
    .map((a) => `${a.alias}:${a.field?.dataType ?? ""}`)
    .join(",")}`;
}

export interface ReadSerializers {
  list(version: number, result: ListResult): string;
  record(version: number, result: RecordResult): string;
  /** How many compiled serializers the cache holds (tests, metrics). */
  size(): number;
}

export function createReadSerializers(maxEntries = 500): ReadSerializers {
  const cache = new Map<string, Serializer>();

  function compiled(key: string, schema: () => Schema): Serializer {
    let fn = cache.get(key);
    if (fn) {
      // Most recently used last: the oldest entry is the first to go.
      cache.delete(key);
      cache.set(key, fn);
      return fn;
    }
    fn = build(schema() as unknown as Parameters<typeof build>[0]) as Serializer;
    cache.set(key, fn);
    if (cache.size > maxEntries) cache.delete(cache.keys().next().value!);
    return fn;
  }

  return {
    list(version, result) {
      const item =
        result.kind === "records" ? () => recordSchema(result.shape) : () => groupSchema(result.shape);
      const key = `${version}|list|${result.kind === "records" ? shapeKey(result.shape) : groupKey(result.shape)}`;
      return compiled(key, () => ({
        type: "object",
        properties: { data: { type: "array", items: item() }, meta: META, debug: ANY },
      }))(result);
    },
    record(version, result) {
      return compiled(`${version}|record|${shapeKey(result.shape)}`, () => ({
        type: "object",
        properties: { data: recordSchema(result.shape), debug: ANY },
      }))(result);
    },
    size() {
      return cache.size;
    },
  };
}
