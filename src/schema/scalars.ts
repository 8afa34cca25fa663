// The custom scalars of graphql.md: one per field type that GraphQL's own scalars cannot carry.
// Values go out as REST sends them (numbers, 8- and 14-digit strings, JSON); input values are
// checked by the write pipeline and the planner with the REST errors, so parsing here only takes
// the JSON shape a client sends.
import { GraphQLError, GraphQLScalarType, Kind, type ValueNode } from "graphql";

function literal(node: ValueNode): unknown {
  switch (node.kind) {
    case Kind.STRING:
    case Kind.ENUM:
      return node.value;
    case Kind.INT:
    case Kind.FLOAT:
      return Number(node.value);
    case Kind.BOOLEAN:
      return node.value;
    case Kind.NULL:
      return null;
    case Kind.LIST:
      return node.values.map(literal);
    case Kind.OBJECT:
      return Object.fromEntries(node.fields.map((f) => [f.name.value, literal(f.value)]));
    default:
      return undefined;
  }
}

const passThrough = (name: string, description: string) =>
  new GraphQLScalarType({
    name,
    description,
    serialize: (v) => v,
    parseValue: (v) => v,
    parseLiteral: (node) => literal(node),
  });

/**
 * A whole number past 2^53 - 1 cannot be told from its neighbours once it is a JavaScript number:
 * refused here, naming the number as the client wrote it (a literal), instead of a later error
 * quoting a rounded one.
 */
function checkSafeInteger(shown: string, value: unknown): void {
  if (typeof value === "number" && Number.isInteger(value) && !Number.isSafeInteger(value))
    throw new GraphQLError(`Int64 cannot represent ${shown}: a whole number from -(2^53 - 1) to 2^53 - 1.`);
}

export const Int64 = new GraphQLScalarType({
  name: "Int64",
  description:
    "An INTEGER field: a whole number up to 2^53 - 1, sent as a JSON number (ids may exceed 32 bits).",
  serialize: (v) => v,
  parseValue: (v) => {
    checkSafeInteger(String(v), v);
    return v;
  },
  parseLiteral: (node) => {
    const value = literal(node);
    if (node.kind === Kind.INT) checkSafeInteger(node.value, value);
    return value;
  },
});
export const Decimal = passThrough(
  "Decimal",
  "A DECIMAL field as a JSON number (exact up to 15 significant digits, as in REST).",
);
export const DateScalar = passThrough("Date", "A DATE field: 8 digits YYYYMMDD.");
export const Timestamp = passThrough("Timestamp", "A TIMESTAMP field: 14 digits YYYYMMDDHHmmss.");
export const JSONScalar = passThrough("JSON", "Any JSON value.");
