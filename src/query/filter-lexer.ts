// Tokens of the $filter expression language. Positions are 1-based character offsets, reported in
// INVALID_FILTER errors together with the offending text.
import { invalidFilter } from "./errors.ts";

export type TokenKind = "lparen" | "rparen" | "comma" | "string" | "number" | "word" | "end";

export interface Token {
  readonly kind: TokenKind;
  /** The source text of the token (the quoted form for strings). */
  readonly text: string;
  /** Strings unescaped, numbers parsed; words as written. */
  readonly value: string | number;
  readonly position: number;
}

export const FILTER_PARAMETER = "$filter";

const WORD_START = /[A-Za-z_]/;
const WORD_CHAR = /[A-Za-z0-9_]/;
const NUMBER_AT = /-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
const ESCAPES: Record<string, string> = { n: "\n", t: "\t", r: "\r" };

function shown(text: string): string {
  return text.length > 30 ? `${text.slice(0, 30)}…` : text;
}

export function filterSyntaxError(token: string, position: number, expected: string) {
  const what = token === "" ? "end of expression" : `'${shown(token)}'`;
  return invalidFilter(
    `Invalid $filter: unexpected ${what} at position ${position}; expected ${expected}.`,
    FILTER_PARAMETER,
    {
      token: shown(token),
      position,
      expected,
    },
  );
}

function readString(src: string, start: number): { token: Token; next: number } {
  const quote = src[start]!;
  let value = "";
  let i = start + 1;
  while (i < src.length) {
    const ch = src[i]!;
    if (ch === "\\") {
      const escaped = src[i + 1];
      if (escaped === undefined) break;
      value += ESCAPES[escaped] ?? escaped;
      i += 2;
      continue;
    }
    if (ch === quote) {
      if (src[i + 1] === quote) {
        value += quote;
        i += 2;
        continue;
      }
      return {
        token: { kind: "string", text: src.slice(start, i + 1), value, position: start + 1 },
        next: i + 1,
      };
    }
    value += ch;
    i++;
  }
  throw invalidFilter(
    `Invalid $filter: the string starting at position ${start + 1} is not closed (${shown(src.slice(start))}).`,
    FILTER_PARAMETER,
    { token: shown(src.slice(start)), position: start + 1, expected: `a closing ${quote}` },
  );
}

export function tokenize(src: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < src.length) {
    const ch = src[i]!;
    if (ch === " " || ch === "\t" || ch === "\n" || ch === "\r") {
      i++;
      continue;
    }
    const position = i + 1;
    if (ch === "(" || ch === ")" || ch === ",") {
      const kind = ch === "(" ? "lparen" : ch === ")" ? "rparen" : "comma";
      tokens.push({ kind, text: ch, value: ch, position });
      i++;
      continue;
    }
    if (ch === "'" || ch === '"') {
      const { token, next } = readString(src, i);
      tokens.push(token);
      i = next;
      continue;
    }
    if (ch === "-" || (ch >= "0" && ch <= "9")) {
      NUMBER_AT.lastIndex = i;
      const m = NUMBER_AT.exec(src);
      const value = m ? Number(m[0]) : Number.NaN;
      if (!m || !Number.isFinite(value)) throw filterSyntaxError(src.slice(i, i + 10), position, "a number");
      tokens.push({ kind: "number", text: m[0], value, position });
      i += m[0].length;
      continue;
    }
    if (WORD_START.test(ch)) {
      let j = i + 1;
      while (j < src.length && WORD_CHAR.test(src[j]!)) j++;
      const text = src.slice(i, j);
      tokens.push({ kind: "word", text, value: text, position });
      i = j;
      continue;
    }
    throw filterSyntaxError(ch, position, "a field, a value, a parenthesis or an operator");
  }
  tokens.push({ kind: "end", text: "", value: "", position: src.length + 1 });
  return tokens;
}
