// Pre-insert templates (TB_COST.VALUE_TEMP): literal text with placeholders, decisions.md §4.
// Parsed once when metadata loads; evaluated by the write pipeline.

export type TemplatePart =
  | { kind: "text"; text: string }
  | { kind: "now" | "today" | "year" | "user" | "tenant" | "source" | "centro_dett" | "ambiente" | "uuid" }
  | { kind: "field"; field: string }
  | { kind: "seq"; name: string; width: number | null };

const SIMPLE = new Set([
  "now",
  "today",
  "year",
  "user",
  "tenant",
  "source",
  "centro_dett",
  "ambiente",
  "uuid",
]);
const NAME_RE = /^[A-Za-z][A-Za-z0-9_]{0,59}$/;

export class TemplateSyntaxError extends Error {}

export function parseTemplate(template: string): TemplatePart[] {
  const parts: TemplatePart[] = [];
  let text = "";
  let i = 0;
  while (i < template.length) {
    const ch = template[i]!;
    if (ch !== "{") {
      text += ch;
      i++;
      continue;
    }
    const end = template.indexOf("}", i);
    if (end < 0) throw new TemplateSyntaxError(`unclosed "{" at position ${i}`);
    const body = template.slice(i + 1, end);
    if (text) parts.push({ kind: "text", text });
    text = "";
    parts.push(parsePlaceholder(body));
    i = end + 1;
  }
  if (text) parts.push({ kind: "text", text });
  return parts;
}

function parsePlaceholder(body: string): TemplatePart {
  if (SIMPLE.has(body)) return { kind: body } as TemplatePart;
  const [head, a, b, ...rest] = body.split(":");
  if (head === "field" && a && NAME_RE.test(a) && b === undefined) return { kind: "field", field: a };
  if (head === "seq" && a && NAME_RE.test(a) && rest.length === 0) {
    if (b === undefined) return { kind: "seq", name: a, width: null };
    if (/^\d{1,2}$/.test(b)) return { kind: "seq", name: a, width: Number(b) };
  }
  throw new TemplateSyntaxError(`unknown placeholder {${body}}`);
}

/** Placeholders whose text is digits only ({year}, a counter), so that a number may hold it. */
const DIGIT_PLACEHOLDERS = new Set(["year", "seq"]);

/**
 * Why a template cannot give a value of a field of `type`, or null when it can (or may: a copied
 * field's value is judged when written). Text fields take any template; a number, date, timestamp
 * or boolean only one whose every part gives what that type holds: a literal of it, the digits of
 * {year} and counters, {today} for a date, {now} for a timestamp. Otherwise every create in that
 * form would fail on a field the client did not send and cannot fix (INVALID_FIELD_VALUE).
 */
export function templateTypeProblem(parts: readonly TemplatePart[], type: string): string | null {
  if (parts.some((p) => p.kind === "field")) return null;
  const allowed: Record<string, (p: TemplatePart) => boolean> = {
    INTEGER: (p) => (p.kind === "text" ? /^-?\d*$/.test(p.text) : DIGIT_PLACEHOLDERS.has(p.kind)),
    DECIMAL: (p) => (p.kind === "text" ? /^-?[\d.]*$/.test(p.text) : DIGIT_PLACEHOLDERS.has(p.kind)),
    DATE: (p) =>
      p.kind === "text" ? /^\d*$/.test(p.text) : p.kind === "today" || DIGIT_PLACEHOLDERS.has(p.kind),
    TIMESTAMP: (p) =>
      p.kind === "text"
        ? /^\d*$/.test(p.text)
        : p.kind === "now" || p.kind === "today" || DIGIT_PLACEHOLDERS.has(p.kind),
    BOOLEAN: (p) => p.kind === "text" && (p.text === "true" || p.text === "false"),
  };
  const fits = allowed[type];
  if (!fits) return null;
  const bad = parts.find((p) => !fits(p));
  if (bad)
    return `a ${type} field's template must give a ${type.toLowerCase()} value; ${bad.kind === "text" ? `"${bad.text}"` : `{${bad.kind}}`} does not`;
  // A literal alone is judged as the value it is.
  const only = parts.length === 1 ? parts[0] : undefined;
  if (only?.kind === "text") {
    const text = only.text;
    const ok =
      type === "INTEGER"
        ? /^-?\d+$/.test(text) && Number.isSafeInteger(Number(text))
        : type === "DECIMAL"
          ? text.trim() !== "" && Number.isFinite(Number(text))
          : type === "DATE"
            ? text.length === 8
            : type === "TIMESTAMP"
              ? text.length === 14
              : true;
    if (!ok) return `"${text}" is not a ${type.toLowerCase()} value`;
  }
  return null;
}
