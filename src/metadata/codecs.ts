// One codec per field type (TB_VAR.DATA_TYPE, decisions.md §3): everything that depends on a
// field's type lives here, once per type: the SQL column (DDL), the JSON schema of REST responses
// and of OpenAPI, the GraphQL scalar, the cast of a filter literal, the check and conversion of a
// body value into a column value, and the value of a VALUE_TEMP template's text. The DDL sync,
// serializers, OpenAPI, the GraphQL schema builder, the planner and the write pipeline ask the codec
// instead of switching on the type themselves.
import { ValidationError } from "../errors.ts";
import { exceedsDepth, MAX_JSON_DEPTH } from "../json-depth.ts";
import type { DataType, DimensionDef, FieldDef } from "../types.ts";
import {
  DEFAULT_DECIMAL_PRECISION,
  DEFAULT_STRING_LENGTH,
  hasNonFiniteNumber,
  hasUnpairedSurrogate,
  safeStringId,
  storableText,
  validCalendar,
} from "./data-types.ts";

type Schema = Record<string, unknown>;

/** A filter literal as the query model carries it. */
export type Literal = string | number | boolean | null;

export interface ColumnType {
  sqlType: string;
  family: "varchar" | "text" | "bigint" | "numeric" | "boolean" | "jsonb";
  length: number | null;
  precision: number | null;
  scale: number | null;
  identity: boolean;
}

/** The GraphQL scalar of a type, by name (src/schema/scalars.ts holds the objects). */
export type GraphQLScalarName = "String" | "Int64" | "Decimal" | "Boolean" | "Date" | "Timestamp" | "JSON";

export interface FieldCodec {
  /** The column of the field in its dimension table. */
  column(field: FieldDef, dim: DimensionDef): ColumnType;
  /** The value's schema in REST responses (fast-json-stringify, OpenAPI 3.0 style `nullable`). */
  readonly responseSchema: Schema;
  /** The value's schema in the OpenAPI 3.1 document (null allowed). */
  readonly openApiSchema: Schema;
  readonly graphqlScalar: GraphQLScalarName;
  /** Text-like: LIKE and its friends apply. */
  readonly textual: boolean;
  /** A filter literal as the SQL parameter compared with the column (never null here). */
  castFilter(field: FieldDef, v: Literal): unknown;
  /** A body value (not null) checked and turned into the SQL parameter to store. */
  toColumn(field: FieldDef, value: unknown, fieldMaxBytes: number): unknown;
  /** A VALUE_TEMP template's text as a value of the type (the write then checks it). */
  fromTemplate(text: string): unknown;
  /**
   * A CSV cell of an import (decisions §20: values in their REST JSON form) as the body value:
   * the value when the text is one of the type, else the text itself (the write then refuses it
   * with the type's own message).
   */
  fromText(text: string): unknown;
  /**
   * The stored value (`column`, an SQL expression) as an argument of jsonb_build_object that
   * yields what the record's JSON holds: the value as the database handle parses it (int8 and
   * numeric as JS numbers), through JSON.stringify. A create's event payload is built so in the
   * statement that inserts the record (record-store.ts), equal to the one built from the row.
   */
  eventJson(column: string): string;
}

// ---------------------------------------------------------------- shared checks

const INTEGER_RE = /^[+-]?\d{1,20}$/;
const DECIMAL_RE = /^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d{1,3})?$/;
const DATE_RE = /^\d{8}$/;
const TIMESTAMP_RE = /^\d{14}$/;

/** The digits a double keeps exactly, whatever the value (IEEE 754: 15). */
export const MAX_EXACT_DECIMAL_DIGITS = 15;

function invalid(field: FieldDef, message: string): never {
  throw new ValidationError("INVALID_FIELD_VALUE", `${field.code}: ${message}`, { field: field.code });
}

/** A number, or a string of one written as `pattern` says, as a number; NaN for anything else. */
function numberOf(v: Literal, pattern: RegExp): number {
  return typeof v === "number" ? v : typeof v === "string" && pattern.test(v.trim()) ? Number(v) : Number.NaN;
}

/**
 * A value as a message shows it. Typed a Literal, but GraphQL's Int64, Decimal and Date scalars
 * pass any JSON through to the filter: an object or a list is named as one (String() made it
 * "[object Object]" or its members run together).
 */
function describe(v: Literal): string {
  const value: unknown = v;
  if (typeof value === "string") return `'${value.length > 40 ? `${value.slice(0, 40)}…` : value}'`;
  if (Array.isArray(value)) return "a list";
  if (typeof value === "object" && value !== null) return "an object";
  return String(value);
}

/** A literal compared with a text-like column. */
export function filterText(field: FieldDef, v: Literal): string {
  // Not a string or a number: a boolean, null, or an object or list a JSON scalar let through.
  if (typeof v !== "string" && typeof v !== "number") invalid(field, `expected text, got ${describe(v)}`);
  const s = typeof v === "number" ? String(v) : v;
  if (s.includes("\u0000")) invalid(field, "contains a NUL character");
  return s;
}

function filterDigits(field: FieldDef, v: Literal, count: number, what: string): string {
  const s = typeof v === "number" && Number.isInteger(v) && v >= 0 ? String(v) : v;
  if (typeof s !== "string" || s.length !== count || !validCalendar(s)) {
    invalid(field, `expected ${what} as ${count} digits, got ${describe(v)}`);
  }
  return s;
}

/**
 * The digits of a finite number's shortest decimal form (String(n), which may use exponent
 * notation: 1e-7, 1.5e+21) before and after the point, without leading or trailing zeros.
 */
export function decimalDigits(n: number): { integer: number; fraction: number } {
  const m = /^(\d+)(?:\.(\d+))?(?:e([+-]\d+))?$/.exec(String(Math.abs(n)));
  if (!m) return { integer: Number.POSITIVE_INFINITY, fraction: Number.POSITIVE_INFINITY };
  const digits = m[1]! + (m[2] ?? "");
  const point = m[1]!.length + Number(m[3] ?? 0);
  const integer = point <= 0 ? "" : digits.slice(0, point).padEnd(point, "0");
  const fraction = "0".repeat(Math.max(0, -point)) + digits.slice(Math.max(0, point));
  return {
    integer: integer.replace(/^0+/, "").length,
    fraction: fraction.replace(/0+$/, "").length,
  };
}

/** Significant digits of a number's shortest decimal form (1000 and 0.001 have one). */
export function significantDigits(n: number): number {
  const m = /^(\d+)(?:\.(\d+))?(?:e[+-]\d+)?$/.exec(String(Math.abs(n)));
  if (!m) return Number.POSITIVE_INFINITY;
  return `${m[1]}${m[2] ?? ""}`.replace(/^0+/, "").replace(/0+$/, "").length;
}

function storedText(field: FieldDef, value: unknown, fieldMaxBytes: number): string {
  if (typeof value !== "string") invalid(field, `expected a string, got ${typeof value}`);
  if (field.dataType === "STRING" || field.length !== null) {
    const max = field.length ?? DEFAULT_STRING_LENGTH;
    // Counted without spreading: a value far over the limit is refused without copying it.
    if (value.length > max && [...value].length > max) invalid(field, `longer than ${max} characters`);
  } else if (value.length > fieldMaxBytes || Buffer.byteLength(value) > fieldMaxBytes) {
    invalid(field, `longer than ${fieldMaxBytes} bytes`);
  }
  if (!storableText(value)) {
    invalid(
      field,
      value.includes("\u0000")
        ? "contains a NUL character"
        : "contains an unpaired UTF-16 surrogate (not valid Unicode)",
    );
  }
  if (field.isId && !safeStringId(value)) {
    invalid(field, "an id may hold only letters, digits, '-', '_' and '.' (not '..')");
  }
  return value;
}

function storedJson(field: FieldDef, value: unknown, fieldMaxBytes: number): string {
  if (field.dataType === "MEDIA" && (typeof value !== "object" || Array.isArray(value)))
    invalid(field, "expected a media object");
  if (exceedsDepth(value, MAX_JSON_DEPTH)) invalid(field, `nested deeper than ${MAX_JSON_DEPTH} levels`);
  if (hasNonFiniteNumber(value))
    invalid(field, "holds a number beyond a double's range (it would be stored as null)");
  const json = JSON.stringify(value);
  const max = field.length ?? fieldMaxBytes;
  if (json.length > max || Buffer.byteLength(json) > max) invalid(field, `longer than ${max} bytes as JSON`);
  // PostgreSQL's jsonb cannot hold a NUL character.
  if (json.includes("\\u0000")) invalid(field, "contains a NUL character");
  if (hasUnpairedSurrogate(value))
    invalid(field, "contains an unpaired UTF-16 surrogate (not valid Unicode)");
  return json;
}

/** Most types: jsonb_build_object gives the value as pg returns it (text, boolean, jsonb). */
const asStored = (column: string) => column;

const noColumnExtras = { length: null, precision: null, scale: null, identity: false };
const nullable = (type: string): Schema => ({ type, nullable: true });
const nullable31 = (type: string, extra: Schema = {}): Schema => ({ type: [type, "null"], ...extra });

function varchar(length: number): ColumnType {
  return { ...noColumnExtras, sqlType: `VARCHAR(${length})`, family: "varchar", length };
}

function calendar(digits: 8 | 14, what: string, scalar: GraphQLScalarName): FieldCodec {
  const re = digits === 8 ? DATE_RE : TIMESTAMP_RE;
  return {
    column: () => varchar(digits),
    responseSchema: nullable("string"),
    openApiSchema: nullable31("string", { pattern: `^[0-9]{${digits}}$`, description: what }),
    graphqlScalar: scalar,
    textual: true,
    castFilter: (field, v) =>
      filterDigits(field, v, digits, `a ${digits === 8 ? "date" : "timestamp"} ${what}`),
    toColumn(field, value) {
      if (typeof value !== "string" || !re.test(value) || !validCalendar(value))
        invalid(field, `expected a ${digits === 8 ? "date" : "timestamp"} as ${digits} digits ${what}`);
      return value;
    },
    fromTemplate: (text) => text,
    fromText: (text) => text,
    eventJson: asStored,
  };
}

/** JSON text as its value; other text as itself. */
function parsedOrText(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function json(kind: "JSON" | "MEDIA"): FieldCodec {
  return {
    column: () => ({ ...noColumnExtras, sqlType: "JSONB", family: "jsonb" }),
    responseSchema: {},
    openApiSchema:
      kind === "MEDIA" ? { oneOf: [{ $ref: "#/components/schemas/Media" }, { type: "null" }] } : {},
    graphqlScalar: "JSON",
    textual: false,
    castFilter: (field) => invalid(field, "JSON and media fields can only be compared with null"),
    toColumn: storedJson,
    fromTemplate: (text) => (kind === "MEDIA" ? text : parsedOrText(text)),
    fromText: parsedOrText,
    // The stored jsonb as it is: JSON.parse of its text, then JSON.stringify, gives it back.
    eventJson: asStored,
  };
}

// ---------------------------------------------------------------- the codecs

/** STRING and TEXT differ in their column only. */
const TEXT_VALUES: Omit<FieldCodec, "column"> = {
  responseSchema: nullable("string"),
  openApiSchema: nullable31("string"),
  graphqlScalar: "String",
  textual: true,
  castFilter: filterText,
  toColumn: storedText,
  fromTemplate: (text) => text,
  fromText: (text) => text,
  eventJson: asStored,
};

export const CODECS: Readonly<Record<DataType, FieldCodec>> = {
  STRING: { ...TEXT_VALUES, column: (field) => varchar(field.length ?? DEFAULT_STRING_LENGTH) },
  TEXT: { ...TEXT_VALUES, column: () => ({ ...noColumnExtras, sqlType: "TEXT", family: "text" }) },
  INTEGER: {
    column(field, dim) {
      const identity = field.isId && dim.idType === "INTEGER";
      return {
        ...noColumnExtras,
        sqlType: identity ? "BIGINT GENERATED BY DEFAULT AS IDENTITY" : "BIGINT",
        family: "bigint",
        identity,
      };
    },
    responseSchema: nullable("integer"),
    openApiSchema: nullable31("integer"),
    graphqlScalar: "Int64",
    textual: false,
    castFilter(field, v) {
      const n = numberOf(v, INTEGER_RE);
      if (!Number.isSafeInteger(n)) invalid(field, `expected a whole number, got ${describe(v)}`);
      return n;
    },
    toColumn(field, value) {
      if (typeof value !== "number" || !Number.isSafeInteger(value))
        invalid(field, "expected a whole number");
      if (field.length !== null && String(Math.abs(value)).length > Math.max(field.length, 1) && !field.isId)
        invalid(field, `more than ${field.length} digits`);
      return value;
    },
    fromTemplate: (text) => (/^-?\d+$/.test(text) ? Number(text) : text),
    fromText: (text) => (INTEGER_RE.test(text) ? Number(text) : text),
    // int8 beyond JS's safe integers comes back as its digits (src/db/database.ts).
    eventJson: (column) =>
      `CASE WHEN ${column} BETWEEN -9007199254740991 AND 9007199254740991 THEN to_jsonb(${column}) ELSE to_jsonb(${column}::text) END`,
  },
  DECIMAL: {
    column(field) {
      const precision = field.length ?? DEFAULT_DECIMAL_PRECISION;
      const scale = Math.min(field.decimals, precision);
      return {
        ...noColumnExtras,
        sqlType: `NUMERIC(${precision}, ${scale})`,
        family: "numeric",
        precision,
        scale,
      };
    },
    responseSchema: nullable("number"),
    openApiSchema: nullable31("number"),
    graphqlScalar: "Decimal",
    textual: false,
    castFilter(field, v) {
      const n = numberOf(v, DECIMAL_RE);
      if (!Number.isFinite(n)) invalid(field, `expected a number, got ${describe(v)}`);
      return n;
    },
    toColumn(field, value) {
      if (typeof value !== "number" || !Number.isFinite(value)) invalid(field, "expected a number");
      const precision = field.length ?? DEFAULT_DECIMAL_PRECISION;
      const scale = Math.min(field.decimals, precision);
      // DECIMAL travels as a JSON number (a double): more than 15 significant digits would not come
      // back as written, so such a value is refused rather than silently rounded (decisions.md).
      if (significantDigits(value) > MAX_EXACT_DECIMAL_DIGITS)
        invalid(field, `more than ${MAX_EXACT_DECIMAL_DIGITS} significant digits cannot be stored exactly`);
      const { integer, fraction } = decimalDigits(value);
      if (fraction > scale) invalid(field, `more than ${scale} digits after the decimal point`);
      if (integer > precision - scale)
        invalid(field, `more than ${precision - scale} digits before the decimal point`);
      return value;
    },
    fromTemplate: (text) => (text.trim() !== "" && Number.isFinite(Number(text)) ? Number(text) : text),
    fromText: (text) => (DECIMAL_RE.test(text) ? Number(text) : text),
    // numeric comes back as Number(text): a double, whose shortest digits float8 gives too
    // (12.50 → 12.5), where the numeric itself would keep its scale in the payload.
    eventJson: (column) => `${column}::float8`,
  },
  BOOLEAN: {
    column: () => ({ ...noColumnExtras, sqlType: "BOOLEAN", family: "boolean" }),
    responseSchema: nullable("boolean"),
    openApiSchema: nullable31("boolean"),
    graphqlScalar: "Boolean",
    textual: false,
    castFilter(field, v) {
      if (typeof v === "boolean") return v;
      const s = String(v).trim().toLowerCase();
      if (s === "true" || s === "1") return true;
      if (s === "false" || s === "0") return false;
      return invalid(field, `expected true or false, got ${describe(v)}`);
    },
    toColumn(field, value) {
      if (typeof value !== "boolean") invalid(field, "expected true or false");
      return value;
    },
    fromTemplate: (text) => (text === "true" ? true : text === "false" ? false : text),
    fromText: (text) => (text === "true" ? true : text === "false" ? false : text),
    eventJson: asStored,
  },
  DATE: calendar(8, "YYYYMMDD", "Date"),
  TIMESTAMP: calendar(14, "YYYYMMDDHHmmss", "Timestamp"),
  JSON: json("JSON"),
  MEDIA: json("MEDIA"),
};

export function codecOf(type: DataType): FieldCodec {
  return CODECS[type];
}
