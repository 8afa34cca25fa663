import { PermissionDeniedError, ValidationError } from "../../errors.ts";
import { codecOf } from "../../metadata/codecs.ts";
import { fieldConfig } from "../../metadata/build.ts";
import { ruleViolation } from "../../metadata/validation-rules.ts";
import type { DimensionDef, FieldDef } from "../../types.ts";

/**
 * Checks a JSON body value for `field` and returns the SQL parameter to store (null stays null).
 * TEXT and JSON values are bounded by the field's LENGTH (characters of TEXT, bytes of JSON text)
 * or, without one, by `fieldMaxBytes` (UTF-8 bytes).
 */
export function toColumnValue(field: FieldDef, value: unknown, fieldMaxBytes: number): unknown {
  if (value === null || value === undefined) return null;
  return codecOf(field.dataType).toColumn(field, value, fieldMaxBytes);
}

/**
 * A record's values being written, keyed by field code: an object without a prototype, so that a
 * field the body leaves out reads as undefined whatever its code (never Object.prototype's
 * constructor or toString), and any code is an own member when set.
 */
export function fieldValues(): Record<string, unknown> {
  return Object.create(null) as Record<string, unknown>;
}

/** Member `key` of a request body (JSON), or undefined: never one every object inherits. */
export function bodyValue(body: Record<string, unknown>, key: string): unknown {
  return Object.hasOwn(body, key) ? body[key] : undefined;
}

/**
 * 400 INVALID_FIELD_VALUE when a value of `fields` in `values` breaks its field's TB_COST.VALIDATION
 * rule in the caller's context (`centerDett`: the context's row, else the field's base row, as for
 * REQUIRED). Blank values are left to checkRequired; a generated counter is the template's. Every
 * write path (REST, GraphQL, batches, commands, imports) creates and updates through here.
 */
export function checkFieldRules(
  dim: DimensionDef,
  fields: readonly FieldDef[],
  values: Record<string, unknown>,
  centerDett: string | null,
): void {
  for (const f of fields) {
    const rule = fieldConfig(f, centerDett).validation;
    const value = values[f.code];
    if (!rule || isBlank(value) || (typeof value !== "string" && typeof value !== "number")) continue;
    const violation = ruleViolation(rule, value);
    if (violation) {
      throw new ValidationError("INVALID_FIELD_VALUE", `${dim.code}.${f.code} ${violation.message}.`, {
        field: f.code,
        details: { rule: violation.rule, expected: violation.expected },
      });
    }
  }
}

export function isBlank(v: unknown): boolean {
  return v === undefined || v === null || v === "";
}

/**
 * Whether a required `field` has no value in `value`: blank (isBlank), or for text (STRING, TEXT)
 * only whitespace, which a form shows as empty: `"   "` passed where `""` was refused.
 */
function lacksRequiredValue(field: FieldDef, value: unknown): boolean {
  if (isBlank(value)) return true;
  return (
    (field.dataType === "STRING" || field.dataType === "TEXT") &&
    typeof value === "string" &&
    value.trim() === ""
  );
}

/**
 * 422 REQUIRED_FIELD_MISSING when one of `fields` that is required (TB_COST.REQUIRED, or
 * NULLABLE false) has no value in `values` (whitespace-only text counts as none); every missing
 * field is listed.
 */
export function checkRequired(
  dim: DimensionDef,
  fields: readonly FieldDef[],
  values: Record<string, unknown>,
  centerDett: string | null,
  /**
   * A create's caller (absent: trusted, or an update, whose touched fields are the caller's own):
   * whether it may know a field exists (peso) and send it (N). A required field it cannot send
   * is not asked of it; when only such fields are missing, 403 (requiredNotSettable).
   */
  caller?: { knows(field: FieldDef): boolean; sends(field: FieldDef): boolean },
): void {
  const all = fields.filter(
    (f) => (fieldConfig(f, centerDett).required || !f.nullable) && lacksRequiredValue(f, values[f.code]),
  );
  const missing = caller ? all.filter((f) => caller.sends(f)) : all;
  if (caller && missing.length === 0 && all.length > 0) throw requiredNotSettable(dim, all, caller);
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

/**
 * Words of the API's paths after `/{dim}/` that a STRING record id would share: the route wins
 * (`GET /{dim}/export` exports, `PATCH /{dim}/batch` is a batch), so such a record could not be
 * read or written by its path. A create or a key change to one is refused.
 */
const PATH_WORDS: ReadonlySet<string> = new Set([
  "count",
  "fields",
  "export",
  "import",
  "batch",
  "batch-delete",
  "media",
]);

/** 400 INVALID_FIELD_VALUE when `id` is a word of the API's paths (PATH_WORDS). */
export function checkAddressableId(dim: DimensionDef, id: unknown): void {
  if (dim.idType !== "STRING" || typeof id !== "string" || !PATH_WORDS.has(id)) return;
  throw new ValidationError(
    "INVALID_FIELD_VALUE",
    `${dim.idField}: "${id}" is a word of the API's paths (/api/v4/core/${dim.code}/${id} is another endpoint), so the record could not be addressed by its id; choose another id.`,
    { field: dim.idField },
  );
}

/**
 * 403: a create lacks required fields the caller may not send (no N flag for it, or hidden by its
 * peso), and no template fills them: no body it could send would do. The fields it may know are
 * named; one hidden by peso is not (it does not exist for the caller: decisions.md §6).
 */
function requiredNotSettable(
  dim: DimensionDef,
  fields: readonly FieldDef[],
  caller: { knows(field: FieldDef): boolean },
): PermissionDeniedError {
  const named = fields.filter((f) => caller.knows(f)).map((f) => f.code);
  const hidden = fields.length - named.length;
  const what = [
    ...(named.length ? [`${named.join(", ")} (without N for you)`] : []),
    ...(hidden ? [`${hidden === 1 ? "a field" : `${hidden} fields`} your weight hides`] : []),
  ].join(" and ");
  return new PermissionDeniedError(
    `You may not create ${dim.code}: it requires ${what}, which you may not send and no template fills. An administrator can create it, or give such a field a template (VALUE_TEMP) or the N flag at your weight.`,
    { details: { dimension: dim.code, ...(named.length ? { fields: named } : {}) } },
  );
}

/** A table row as a record: TENANT_ID left out, JSON columns as they are, the rest unchanged. */
export function rowToRecord(dim: DimensionDef, row: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const f of dim.fields) {
    if (Object.hasOwn(row, f.code)) out[f.code] = row[f.code];
  }
  return out;
}

/** 14-digit compact UTC timestamp YYYYMMDDHHmmss. */
export function compactTimestamp(d: Date): string {
  // toISOString: YYYY-MM-DDTHH:mm:ss.sssZ (slices, not a regular expression: once per write).
  const iso = d.toISOString();
  return (
    iso.slice(0, 4) +
    iso.slice(5, 7) +
    iso.slice(8, 10) +
    iso.slice(11, 13) +
    iso.slice(14, 16) +
    iso.slice(17, 19)
  );
}
