// Values in and out of dimension tables: checking a body value against its field's type and
// length (decisions.md §3), and turning a table row into a response record.
import { exceedsDepth, MAX_JSON_DEPTH } from "../../json-depth.ts";
import { ValidationError } from "../../errors.ts";
import { fieldConfig } from "../../metadata/build.ts";
import {
  DEFAULT_DECIMAL_PRECISION,
  DEFAULT_STRING_LENGTH,
  hasUnpairedSurrogate,
  safeStringId,
  storableText,
  validCalendar,
} from "../../metadata/data-types.ts";
import type { DimensionDef, FieldDef } from "../../types.ts";

const DATE_RE = /^\d{8}$/;
const TIMESTAMP_RE = /^\d{14}$/;

function invalid(field: FieldDef, message: string): never {
  throw new ValidationError("INVALID_FIELD_VALUE", `${field.code}: ${message}`, { field: field.code });
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

/** The digits a double keeps exactly, whatever the value (IEEE 754: 15). */
export const MAX_EXACT_DECIMAL_DIGITS = 15;

/** Significant digits of a number's shortest decimal form (1000 and 0.001 have one). */
export function significantDigits(n: number): number {
  const m = /^(\d+)(?:\.(\d+))?(?:e[+-]\d+)?$/.exec(String(Math.abs(n)));
  if (!m) return Number.POSITIVE_INFINITY;
  return `${m[1]}${m[2] ?? ""}`.replace(/^0+/, "").replace(/0+$/, "").length;
}

/**
 * Checks a JSON body value for `field` and returns the SQL parameter to store (null stays null).
 * TEXT and JSON values are bounded by the field's LENGTH (characters of TEXT, bytes of JSON text)
 * or, without one, by `fieldMaxBytes` (UTF-8 bytes).
 */
export function toColumnValue(field: FieldDef, value: unknown, fieldMaxBytes: number): unknown {
  if (value === null || value === undefined) return null;
  switch (field.dataType) {
    case "STRING":
    case "TEXT": {
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
    case "INTEGER": {
      if (typeof value !== "number" || !Number.isSafeInteger(value))
        invalid(field, "expected a whole number");
      if (field.length !== null && String(Math.abs(value)).length > Math.max(field.length, 1) && !field.isId)
        invalid(field, `more than ${field.length} digits`);
      return value;
    }
    case "DECIMAL": {
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
    }
    case "BOOLEAN":
      if (typeof value !== "boolean") invalid(field, "expected true or false");
      return value;
    case "DATE":
      if (typeof value !== "string" || !DATE_RE.test(value) || !validCalendar(value))
        invalid(field, "expected a date as 8 digits YYYYMMDD");
      return value;
    case "TIMESTAMP":
      if (typeof value !== "string" || !TIMESTAMP_RE.test(value) || !validCalendar(value))
        invalid(field, "expected a timestamp as 14 digits YYYYMMDDHHmmss");
      return value;
    case "JSON":
    case "MEDIA": {
      if (field.dataType === "MEDIA" && (typeof value !== "object" || Array.isArray(value)))
        invalid(field, "expected a media object");
      if (exceedsDepth(value, MAX_JSON_DEPTH)) invalid(field, `nested deeper than ${MAX_JSON_DEPTH} levels`);
      const json = JSON.stringify(value);
      const max = field.length ?? fieldMaxBytes;
      if (json.length > max || Buffer.byteLength(json) > max)
        invalid(field, `longer than ${max} bytes as JSON`);
      // PostgreSQL's jsonb cannot hold a NUL character.
      if (json.includes("\\u0000")) invalid(field, "contains a NUL character");
      if (hasUnpairedSurrogate(value))
        invalid(field, "contains an unpaired UTF-16 surrogate (not valid Unicode)");
      return json;
    }
  }
}

export function isBlank(v: unknown): boolean {
  return v === undefined || v === null || v === "";
}

/**
 * 422 REQUIRED_FIELD_MISSING when one of `fields` that is required (TB_COST.REQUIRED, or
 * NULLABLE false) has no value in `values`; every missing field is listed.
 */
export function checkRequired(
  dim: DimensionDef,
  fields: readonly FieldDef[],
  values: Record<string, unknown>,
  centerDett: string | null,
): void {
  const missing = fields.filter(
    (f) => (fieldConfig(f, centerDett).required || !f.nullable) && isBlank(values[f.code]),
  );
  const first = missing[0];
  if (!first) return;
  const names = missing.map((f) => f.code).join(", ");
  throw new ValidationError(
    "REQUIRED_FIELD_MISSING",
    `${dim.code}: required field${missing.length > 1 ? "s" : ""} missing: ${names}.`,
    {
      field: first.code,
      ...(missing.length > 1
        ? { errors: missing.map((f) => ({ field: f.code, message: `${f.code} is required.` })) }
        : {}),
    },
    422,
  );
}

/** A table row as a record: TENANT_ID left out, JSON columns as they are, the rest unchanged. */
export function rowToRecord(dim: DimensionDef, row: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const f of dim.fields) {
    if (f.code in row) out[f.code] = row[f.code];
  }
  return out;
}

/** 14-digit compact UTC timestamp YYYYMMDDHHmmss. */
export function compactTimestamp(d: Date): string {
  return d.toISOString().replace(/[-:T]/g, "").slice(0, 14);
}
