// TB_COST.VALIDATION (issue 39 §3): a field's value rules, `pattern`, `min`, `max`, `min_length`,
// `max_length`, `values`. Parsed and checked when the metadata is written (an invalid rule is a
// metadata problem), then checked on every create and update (src/resolvers/write/values.ts).
//
// Patterns are JavaScript regular expressions matched against the whole value (`^(?:p)$`, u flag).
// They run on the backtracking engine, so they are made safe by bounds (docs/decisions.md,
// "Validation rules"): a pattern is refused when it has a quantified group holding a quantifier or
// an alternation (`(a+)+`, `(a|ab)*`), a backreference or a lookaround, more than
// MAX_PATTERN_QUANTIFIERS variable quantifiers (so at worst quadratic: `a*a*`) or more than
// MAX_PATTERN_LENGTH characters; and a value
// longer than MAX_PATTERN_VALUE_LENGTH characters is refused by the rule without being matched.
import type { DataType } from "../types.ts";

export interface ValidationRule {
  readonly pattern?: string;
  readonly min?: number;
  readonly max?: number;
  readonly min_length?: number;
  readonly max_length?: number;
  readonly values?: readonly (string | number)[];
}

export type RuleName = keyof ValidationRule;

export const RULE_NAMES: readonly RuleName[] = [
  "pattern",
  "min",
  "max",
  "min_length",
  "max_length",
  "values",
];
export const MAX_PATTERN_LENGTH = 200;
export const MAX_PATTERN_QUANTIFIERS = 2;
export const MAX_PATTERN_VALUE_LENGTH = 500;
const MAX_VALUES = 1000;

const NUMERIC: ReadonlySet<DataType> = new Set(["INTEGER", "DECIMAL"]);
const TEXTUAL: ReadonlySet<DataType> = new Set(["STRING", "TEXT"]);

/** The problem that makes `pattern` unsafe or invalid, or null. */
export function patternProblem(pattern: string): string | null {
  if (pattern.length > MAX_PATTERN_LENGTH) return `pattern is longer than ${MAX_PATTERN_LENGTH} characters`;
  try {
    new RegExp(pattern, "u");
  } catch (err) {
    return `pattern is not a valid regular expression: ${(err as Error).message}`;
  }
  // Groups open: whether each holds a quantifier or an alternation so far.
  const groups: Array<{ risky: boolean }> = [];
  let quantifiers = 0;
  /** What the next quantifier applies to: a closed group (and whether it was risky), or an atom. */
  let last: { group: boolean; risky: boolean } | null = null;
  const markRisky = () => {
    for (const g of groups) g.risky = true;
  };
  for (let i = 0; i < pattern.length; i++) {
    const ch = pattern[i]!;
    if (ch === "\\") {
      const next = pattern[i + 1] ?? "";
      if (/[1-9]/.test(next) || next === "k") return "pattern may not use backreferences";
      i += 1;
      last = { group: false, risky: false };
    } else if (ch === "[") {
      // A character class: one atom, whatever it holds.
      i += 1;
      if (pattern[i] === "^") i += 1;
      if (pattern[i] === "]") i += 1;
      while (i < pattern.length && pattern[i] !== "]") i += pattern[i] === "\\" ? 2 : 1;
      last = { group: false, risky: false };
    } else if (ch === "(") {
      if (pattern[i + 1] === "?") {
        const kind = pattern.slice(i + 2, i + 4);
        if (kind.startsWith("=") || kind.startsWith("!") || kind === "<=" || kind === "<!")
          return "pattern may not use lookarounds";
      }
      groups.push({ risky: false });
      last = null;
    } else if (ch === ")") {
      const g = groups.pop();
      last = { group: true, risky: g?.risky ?? false };
    } else if (ch === "|") {
      markRisky();
      last = null;
    } else if (
      ch === "*" ||
      ch === "+" ||
      ch === "?" ||
      (ch === "{" && /^\{\d+(,\d*)?\}/.test(pattern.slice(i)))
    ) {
      // An exact count ({3}) leaves the engine no choice; any other quantifier is a variable one.
      const exact = ch === "{" && /^\{\d+\}/.test(pattern.slice(i));
      if (ch === "{") i = pattern.indexOf("}", i);
      if (pattern[i + 1] === "?") i += 1; // lazy
      if (!last) continue;
      if (last.group && last.risky)
        return "pattern has a quantified group holding a quantifier or an alternation (catastrophic backtracking)";
      if (!exact) {
        quantifiers += 1;
        if (quantifiers > MAX_PATTERN_QUANTIFIERS)
          return `pattern has more than ${MAX_PATTERN_QUANTIFIERS} variable quantifiers (*, +, ?, {n,m}); exact counts ({n}) are free`;
        markRisky();
      }
      last = null;
    } else {
      last = { group: false, risky: false };
    }
  }
  return null;
}

const isWholeNonNegative = (v: unknown): v is number => Number.isInteger(v) && (v as number) >= 0;

/**
 * Parses TB_COST.VALIDATION (an object, or its JSON text) for a field of `dataType` (null: not
 * known here): the rule, or the problems that make it invalid.
 */
export function parseValidationRule(
  raw: unknown,
  dataType: DataType | null,
): { rule: ValidationRule | null; problems: string[] } {
  if (raw === null || raw === undefined || raw === "") return { rule: null, problems: [] };
  let value = raw;
  if (typeof raw === "string") {
    try {
      value = JSON.parse(raw);
    } catch {
      return { rule: null, problems: ["is not valid JSON"] };
    }
  }
  if (value === null || typeof value !== "object" || Array.isArray(value))
    return { rule: null, problems: ["must be a JSON object of rules"] };
  const obj = value as Record<string, unknown>;
  const problems: string[] = [];
  const rule: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(obj)) {
    if (!(RULE_NAMES as string[]).includes(key)) {
      problems.push(`unknown rule "${key}" (known: ${RULE_NAMES.join(", ")})`);
      continue;
    }
    rule[key] = v;
  }
  const textual = dataType === null || TEXTUAL.has(dataType);
  const numeric = dataType === null || NUMERIC.has(dataType);
  if (rule.pattern !== undefined) {
    if (typeof rule.pattern !== "string") problems.push("pattern must be a string");
    else {
      const p = patternProblem(rule.pattern);
      if (p) problems.push(p);
    }
    if (!textual) problems.push(`pattern applies to STRING and TEXT fields, not ${dataType}`);
  }
  for (const key of ["min", "max"] as const) {
    if (rule[key] === undefined) continue;
    if (typeof rule[key] !== "number" || !Number.isFinite(rule[key]))
      problems.push(`${key} must be a number`);
    if (!numeric) problems.push(`${key} applies to INTEGER and DECIMAL fields, not ${dataType}`);
  }
  for (const key of ["min_length", "max_length"] as const) {
    if (rule[key] === undefined) continue;
    if (!isWholeNonNegative(rule[key])) problems.push(`${key} must be a whole number >= 0`);
    if (!textual) problems.push(`${key} applies to STRING and TEXT fields, not ${dataType}`);
  }
  if (typeof rule.min === "number" && typeof rule.max === "number" && rule.min > rule.max)
    problems.push(`min (${rule.min}) is greater than max (${rule.max})`);
  if (
    isWholeNonNegative(rule.min_length) &&
    isWholeNonNegative(rule.max_length) &&
    rule.min_length > rule.max_length
  )
    problems.push(`min_length (${rule.min_length}) is greater than max_length (${rule.max_length})`);
  if (rule.values !== undefined) {
    const list = rule.values;
    if (!Array.isArray(list) || list.length === 0 || list.length > MAX_VALUES)
      problems.push(`values must be a non-empty list of at most ${MAX_VALUES} values`);
    else {
      const wanted = numeric && dataType !== null ? "number" : textual && dataType !== null ? "string" : null;
      for (const item of list) {
        const ok = wanted ? typeof item === wanted : typeof item === "string" || typeof item === "number";
        if (!ok) {
          problems.push(
            `values must hold ${wanted ?? "string or number"}s only, got ${JSON.stringify(item)}`,
          );
          break;
        }
      }
      if (dataType !== null && !numeric && !textual)
        problems.push(`values applies to STRING, TEXT, INTEGER and DECIMAL fields, not ${dataType}`);
    }
  }
  if (problems.length) return { rule: null, problems };
  return { rule: Object.keys(rule).length ? Object.freeze(rule as ValidationRule) : null, problems: [] };
}

/** A value the rule refuses: which rule, what it expects, and the message. */
export interface RuleViolation {
  rule: RuleName;
  expected: unknown;
  message: string;
}

/** The first rule `value` (already type-checked; not null) breaks, or null. */
export function ruleViolation({ rule, regex }: CompiledRule, value: unknown): RuleViolation | null {
  if (rule.values) {
    const found = rule.values.some((v) =>
      typeof v === "number" ? Number(value) === v && value !== "" : v === value,
    );
    if (!found)
      return { rule: "values", expected: rule.values, message: `must be one of ${rule.values.join(", ")}` };
  }
  if (
    typeof value === "string" &&
    (rule.pattern !== undefined || rule.min_length !== undefined || rule.max_length !== undefined)
  ) {
    const length = [...value].length;
    if (rule.min_length !== undefined && length < rule.min_length)
      return {
        rule: "min_length",
        expected: rule.min_length,
        message: `must be at least ${rule.min_length} characters long`,
      };
    if (rule.max_length !== undefined && length > rule.max_length)
      return {
        rule: "max_length",
        expected: rule.max_length,
        message: `must be at most ${rule.max_length} characters long`,
      };
    if (rule.pattern !== undefined) {
      if (value.length > MAX_PATTERN_VALUE_LENGTH)
        return {
          rule: "pattern",
          expected: rule.pattern,
          message: `is longer than ${MAX_PATTERN_VALUE_LENGTH} characters, the most a pattern is matched against`,
        };
      if (regex && !regex.test(value))
        return { rule: "pattern", expected: rule.pattern, message: `must match the pattern ${rule.pattern}` };
    }
  }
  if (rule.min !== undefined || rule.max !== undefined) {
    const n = typeof value === "number" ? value : Number(value);
    if (rule.min !== undefined && n < rule.min)
      return { rule: "min", expected: rule.min, message: `must be at least ${rule.min}` };
    if (rule.max !== undefined && n > rule.max)
      return { rule: "max", expected: rule.max, message: `must be at most ${rule.max}` };
  }
  return null;
}

/** The pattern matched against the whole value: compiled once, when the model is built. */
export function anchored(pattern: string): RegExp {
  return new RegExp(`^(?:${pattern})$`, "u");
}

/** A rule with its pattern compiled (FieldConfig.validation). */
export interface CompiledRule {
  readonly rule: ValidationRule;
  readonly regex: RegExp | null;
}

export function compileRule(rule: ValidationRule | null): CompiledRule | null {
  if (!rule) return null;
  return Object.freeze({ rule, regex: rule.pattern === undefined ? null : anchored(rule.pattern) });
}

const ENUM_VALUE_NAME = /^[_A-Za-z][_0-9A-Za-z]*$/;

/**
 * The enumeration a field's GraphQL input type carries (its `<DIM>_<FIELD>_enum`), or null to
 * keep the scalar: its base rule's `values`, when they are strings that are all GraphQL enum value
 * names (not true, false or null) and every context's rule declares the same list (a context
 * without one would accept other values, which an enum would refuse).
 */
export function graphqlEnumValues(field: {
  config: { validation: CompiledRule | null };
  contextConfigs: ReadonlyMap<string, { validation: CompiledRule | null }>;
}): readonly string[] | null {
  const values = field.config.validation?.rule.values;
  if (!values) return null;
  const names: string[] = [];
  for (const v of values) {
    if (typeof v !== "string" || !ENUM_VALUE_NAME.test(v) || ["true", "false", "null"].includes(v))
      return null;
    names.push(v);
  }
  const same = (other: readonly (string | number)[] | undefined) =>
    other !== undefined && other.length === values.length && other.every((v, i) => v === values[i]);
  for (const ctx of field.contextConfigs.values()) if (!same(ctx.validation?.rule.values)) return null;
  return names;
}
