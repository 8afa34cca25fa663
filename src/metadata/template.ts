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
