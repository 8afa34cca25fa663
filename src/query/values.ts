// Filter values cast and checked by the field's type (decisions.md §3), so that a wrong value is a
// 400 INVALID_FIELD_VALUE and never reaches the database as something it would refuse.
import { codecOf, filterText } from "../metadata/codecs.ts";
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

function isTextColumn(field: FieldDef): boolean {
  return codecOf(field.dataType).textual;
}

/** One value for a comparison with `field` (never null here). */
export function castScalar(field: FieldDef, v: FilterLiteral): unknown {
  return codecOf(field.dataType).castFilter(field, v);
}

function escapeLike(s: string): string {
  return s.replace(/[\\%_]/g, (c) => `\\${c}`);
}

function likePattern(field: FieldDef, op: FilterOperator, v: FilterLiteral): string {
  const s = filterText(field, v);
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
