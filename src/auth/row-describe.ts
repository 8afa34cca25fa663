// A bound row scope in words (decisions.md §17), for the caller it belongs to: what a 403
// ROW_NOT_ALLOWED tells them their grants let them write. It holds only the caller's own values
// (their unit, environment, user) and their grants' filter constants, never another row's data.
import type { FieldDef } from "../types.ts";
import type { PlannedFilter } from "../query/types.ts";

const literal = (v: unknown): string =>
  v === null
    ? "null"
    : typeof v === "string"
      ? `'${v}'`
      : Array.isArray(v)
        ? `(${v.map(literal).join(", ")})`
        : String(v);

/** The scope as a $filter-like text: `CENTRO_DETT eq 'MI01' and VIP eq true`. */
export function describeScope(f: PlannedFilter): string {
  switch (f.kind) {
    case "condition": {
      const v = f.literal ?? f.value;
      if (f.op === "between" && Array.isArray(v))
        return `${f.field.code} between ${literal(v[0])} and ${literal(v[1])}`;
      return `${f.field.code} ${f.op} ${literal(v)}`;
    }
    case "and":
    case "or":
      return f.items
        .map((item) =>
          item.kind === "and" || item.kind === "or" ? `(${describeScope(item)})` : describeScope(item),
        )
        .join(` ${f.kind} `);
    case "not":
      return `not (${describeScope(f.item)})`;
    case "none":
      return "no row (a ROW_FILTER of your grants cannot hold for your values)";
    case "live":
      return "TREC ne 'C'";
    case "search":
      return `search ${literal(f.text)}`;
  }
}

/** The fields a scope names, each once, in the order named. */
export function scopeFields(f: PlannedFilter, into: FieldDef[] = []): FieldDef[] {
  if (f.kind === "condition") {
    if (!into.includes(f.field)) into.push(f.field);
  } else if (f.kind === "and" || f.kind === "or") for (const item of f.items) scopeFields(item, into);
  else if (f.kind === "not") scopeFields(f.item, into);
  return into;
}
