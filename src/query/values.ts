// Filter values cast and checked by the field's type (decisions.md §3), so that a wrong value is a
// 400 INVALID_FIELD_VALUE and never reaches the database as something it would refuse.
import { validCalendar } from "../metadata/data-types.ts";
import type { FieldDef } from "../types.ts";
import { filterTooComplex, invalidFieldValue, invalidFilter } from "./errors.ts";
import type { FilterLiteral, FilterOperator } from "./types.ts";

/** Operators that compile to LIKE: only for text-like columns. */
export const TEXT_OPERATORS: ReadonlySet<FilterOperator> = new Set([
  "like",
  "startswith",
  "endswith",
  "contains",
]);
const LIST_OPERATORS: ReadonlySet<FilterOperator> = new Set(["in", "nin"]);
const MAX_LIST_VALUES = 1000;

const INTEGER_RE = /^[+-]?\d{1,20}$/;
const DECIMAL_RE = /^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d{1,3})?$/;

function isTextColumn(field: FieldDef): boolean {
  return (
    field.dataType === "STRING" ||
    field.dataType === "TEXT" ||
    field.dataType === "DATE" ||
    field.dataType === "TIMESTAMP"
  );
}

function describe(v: FilterLiteral): string {
  return typeof v === "string" ? `'${v.length > 40 ? `${v.slice(0, 40)}…` : v}'` : String(v);
}

function text(field: FieldDef, v: FilterLiteral): string {
  if (typeof v === "boolean" || v === null)
    throw invalidFieldValue(field.code, `expected text, got ${describe(v)}`);
  const s = typeof v === "number" ? String(v) : v;
  if (s.includes("\u0000")) throw invalidFieldValue(field.code, "contains a NUL character");
  return s;
}

function digits(field: FieldDef, v: FilterLiteral, count: number, what: string): string {
  const s = typeof v === "number" && Number.isInteger(v) && v >= 0 ? String(v) : v;
  if (typeof s !== "string" || s.length !== count || !validCalendar(s)) {
    throw invalidFieldValue(field.code, `expected ${what} as ${count} digits, got ${describe(v)}`);
  }
  return s;
}

/** One value for a comparison with `field` (never null here). */
export function castScalar(field: FieldDef, v: FilterLiteral): unknown {
  switch (field.dataType) {
    case "STRING":
    case "TEXT":
      return text(field, v);
    case "DATE":
      return digits(field, v, 8, "a date YYYYMMDD");
    case "TIMESTAMP":
      return digits(field, v, 14, "a timestamp YYYYMMDDHHmmss");
    case "INTEGER": {
      const n =
        typeof v === "number"
          ? v
          : typeof v === "string" && INTEGER_RE.test(v.trim())
            ? Number(v)
            : Number.NaN;
      if (!Number.isSafeInteger(n))
        throw invalidFieldValue(field.code, `expected a whole number, got ${describe(v)}`);
      return n;
    }
    case "DECIMAL": {
      const n =
        typeof v === "number"
          ? v
          : typeof v === "string" && DECIMAL_RE.test(v.trim())
            ? Number(v)
            : Number.NaN;
      if (!Number.isFinite(n)) throw invalidFieldValue(field.code, `expected a number, got ${describe(v)}`);
      return n;
    }
    case "BOOLEAN": {
      if (typeof v === "boolean") return v;
      const s = String(v).trim().toLowerCase();
      if (s === "true" || s === "1") return true;
      if (s === "false" || s === "0") return false;
      throw invalidFieldValue(field.code, `expected true or false, got ${describe(v)}`);
    }
    case "JSON":
    case "MEDIA":
      throw invalidFieldValue(field.code, "JSON and media fields can only be compared with null");
  }
}

function escapeLike(s: string): string {
  return s.replace(/[\\%_]/g, (c) => `\\${c}`);
}

function likePattern(field: FieldDef, op: FilterOperator, v: FilterLiteral): string {
  const s = text(field, v);
  switch (op) {
    case "startswith":
      return `${escapeLike(s)}%`;
    case "endswith":
      return `%${escapeLike(s)}`;
    case "contains":
      return `%${escapeLike(s)}%`;
    default: {
      // A pattern ending in an unpaired escape character is an error in PostgreSQL.
      const trailing = /\\+$/.exec(s)?.[0].length ?? 0;
      if (trailing % 2 === 1)
        throw invalidFieldValue(field.code, "a LIKE pattern may not end with a lone backslash");
      return s;
    }
  }
}

/**
 * The SQL parameter for `field <op> value`: a scalar, a list (in, nin), a pair (between), a LIKE
 * pattern (like, startswith, endswith, contains), or null (eq / ne null: IS NULL / IS NOT NULL).
 */
export function castFilterValue(
  field: FieldDef,
  op: FilterOperator,
  value: FilterLiteral | readonly FilterLiteral[],
  origin: string,
): unknown {
  const isList = Array.isArray(value);
  if (LIST_OPERATORS.has(op) || op === "between") {
    const items = (isList ? value : [value]) as readonly FilterLiteral[];
    if (op === "between" && items.length !== 2) {
      throw invalidFilter(`${origin}: between takes exactly two values.`, origin);
    }
    if (!items.length) throw invalidFilter(`${origin}: ${op} takes at least one value.`, origin);
    if (items.length > MAX_LIST_VALUES) {
      throw filterTooComplex(`${origin}: more than ${MAX_LIST_VALUES} values.`, {
        max_values: MAX_LIST_VALUES,
      });
    }
    return items.map((item) => {
      if (item === null)
        throw invalidFieldValue(field.code, `null is not allowed in ${op}; use eq null or ne null`);
      return castScalar(field, item);
    });
  }
  if (isList) throw invalidFilter(`${origin}: ${op} takes one value.`, origin);
  const single = value as FilterLiteral;
  if (single === null) {
    if (op === "eq" || op === "ne") return null;
    throw invalidFieldValue(field.code, `null can only be compared with eq or ne`);
  }
  if (TEXT_OPERATORS.has(op)) {
    if (!isTextColumn(field)) {
      throw invalidFilter(
        `${origin}: ${op} applies to text fields; ${field.code} is ${field.dataType}.`,
        origin,
      );
    }
    return likePattern(field, op, single);
  }
  return castScalar(field, single);
}
