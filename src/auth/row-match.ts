// A row scope evaluated on a record in memory (decisions.md §17): where no statement runs, as an
// event reaching live subscribers. It follows the compiler's two-valued logic (src/query/compile.ts:
// a condition on a NULL column is false, ne and nin true, NOT the negation), for the comparisons
// it can decide exactly: text by equality, lists and LIKE patterns, numbers by value, booleans.
// Anything else (an ordering of text, which depends on the collation; dates; JSON) is "unknown",
// and an unknown scope lets nothing through: an event is withheld rather than leaked.
import type { PlannedCondition, PlannedFilter } from "../query/types.ts";

type Truth = boolean | "unknown";

function likeRegex(pattern: string): RegExp {
  let out = "";
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    if (c === "\\" && i + 1 < pattern.length) out += escapeRegex(pattern[++i]!);
    else if (c === "%") out += "[\\s\\S]*";
    else if (c === "_") out += "[\\s\\S]";
    else out += escapeRegex(c);
  }
  return new RegExp(`^${out}$`, "u");
}

const escapeRegex = (c: string) => c.replace(/[.*+?^${}()|[\]\\/-]/g, "\\$&");

/**
 * A record's value or a condition's parameter as the field's type compares it, or "unknown" when
 * it cannot be compared exactly (one path for both sides, so they are judged alike).
 */
function comparable(c: PlannedCondition, v: unknown): string | number | boolean | "unknown" {
  switch (c.field.dataType) {
    case "STRING":
    case "TEXT":
      return typeof v === "string" ? v : "unknown";
    case "BOOLEAN":
      return typeof v === "boolean" ? v : "unknown";
    case "INTEGER":
    case "DECIMAL": {
      const n =
        typeof v === "number" ? v : typeof v === "string" || typeof v === "bigint" ? Number(v) : Number.NaN;
      return Number.isFinite(n) ? n : "unknown";
    }
    default:
      return "unknown";
  }
}

function condition(c: PlannedCondition, record: Record<string, unknown>): Truth {
  const raw = record[c.field.code];
  if (raw === undefined) return "unknown";
  if (c.value === null) return c.op === "eq" ? raw === null : raw !== null;
  if (raw === null) return c.op === "ne" || c.op === "nin";
  const value = comparable(c, raw);
  if (value === "unknown") return "unknown";
  const param = Array.isArray(c.value) ? null : comparable(c, c.value);
  switch (c.op) {
    case "eq":
      return param === "unknown" ? "unknown" : value === param;
    case "ne":
      return param === "unknown" ? "unknown" : value !== param;
    case "in":
    case "nin": {
      const list = (c.value as unknown[]).map((v) => comparable(c, v));
      if (list.includes("unknown")) return "unknown";
      const found = list.includes(value);
      return c.op === "in" ? found : !found;
    }
    case "like":
    case "startswith":
    case "endswith":
    case "contains":
      return typeof value === "string" && typeof c.value === "string"
        ? likeRegex(c.value).test(value)
        : "unknown";
    case "gt":
    case "gte":
    case "lt":
    case "lte":
    case "between": {
      if (typeof value !== "number") return "unknown";
      const bounds = (Array.isArray(c.value) ? c.value : [c.value]).map((v) => comparable(c, v));
      if (bounds.some((b) => typeof b !== "number")) return "unknown";
      const [a, b] = bounds as number[];
      if (c.op === "between") return value >= a! && value <= b!;
      return c.op === "gt"
        ? value > a!
        : c.op === "gte"
          ? value >= a!
          : c.op === "lt"
            ? value < a!
            : value <= a!;
    }
  }
}

function evaluate(f: PlannedFilter, record: Record<string, unknown>): Truth {
  switch (f.kind) {
    case "condition":
      return condition(f, record);
    case "none":
      return false;
    case "not": {
      const inner = evaluate(f.item, record);
      return inner === "unknown" ? "unknown" : !inner;
    }
    case "and":
    case "or": {
      // One fold: the value that decides the whole (false for and, true for or) stops it; else
      // an unknown item leaves it unknown, and otherwise it is the other value.
      const decides = f.kind === "or";
      let unknown = false;
      for (const item of f.items) {
        const v = evaluate(item, record);
        if (v === decides) return decides;
        if (v === "unknown") unknown = true;
      }
      return unknown ? "unknown" : !decides;
    }
    default:
      return "unknown";
  }
}

/** Whether the scope lets `record` (REST JSON form) through; null scope: every record. */
export function rowInScope(scope: PlannedFilter | null, record: Record<string, unknown>): boolean {
  return scope === null || evaluate(scope, record) === true;
}

/**
 * How an event stands to a scope: `in` when its record after the change is in it; `left` when an
 * update (one that carries the values it changed, `previous`) took the record out of it, the
 * record before the change being in it; `out` otherwise. A row that leaves a scope is told to
 * those who saw it (without its new values: they no longer see it), one that enters it to those
 * who now do.
 */
export function eventScope(
  scope: PlannedFilter | null,
  record: Record<string, unknown>,
  previous: Record<string, unknown> | undefined,
): "in" | "left" | "out" {
  if (rowInScope(scope, record)) return "in";
  return previous !== undefined && rowInScope(scope, { ...record, ...previous }) ? "left" : "out";
}
