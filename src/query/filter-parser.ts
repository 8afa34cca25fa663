// The $filter expression language, parsed by recursive descent into the query model's FilterExpr:
//
//   or      := and ("or" and)*
//   and     := unary ("and" unary)*
//   unary   := "not" unary | primary
//   primary := "(" or ")" | function "(" field "," literal ")" | field comparison literal
//   comparison := eq | ne | gt | ge | lt | le          (gte, lte accepted too)
//   function   := startwith | endwith | contains | equals (startswith, endswith accepted too)
//   literal    := 'text' | "text" | number | true | false | null
//
// Keywords are case-insensitive. Text longer than MAX_FILTER_LENGTH is FILTER_TOO_COMPLEX before it
// is read; the depth rule itself is checked on the tree (src/query/plan.ts), for every adapter. The
// parser only bounds its own recursion (parentheses and "not" nested beyond MAX_NESTING).
import { filterTooComplex } from "./errors.ts";
import { FILTER_PARAMETER, filterSyntaxError, type Token, tokenize } from "./filter-lexer.ts";
import {
  type FilterCondition,
  type FilterExpr,
  type FilterLiteral,
  type FilterOperator,
  MAX_FILTER_DEPTH,
  MAX_FILTER_LENGTH,
} from "./types.ts";

const COMPARISONS: Record<string, FilterOperator> = {
  eq: "eq",
  ne: "ne",
  gt: "gt",
  ge: "gte",
  gte: "gte",
  lt: "lt",
  le: "lte",
  lte: "lte",
};

const FUNCTIONS: Record<string, FilterOperator> = {
  startwith: "startswith",
  startswith: "startswith",
  endwith: "endswith",
  endswith: "endswith",
  contains: "contains",
  equals: "eq",
};

/** Room for MAX_FILTER_DEPTH operators each written with redundant parentheses; beyond it, refused. */
const MAX_NESTING = MAX_FILTER_DEPTH * 2 + 1;

/** A word's entry in one of the tables above; an Object.prototype name (constructor) is none. */
function named(table: Record<string, FilterOperator>, word: unknown): FilterOperator | undefined {
  const key = String(word).toLowerCase();
  return Object.hasOwn(table, key) ? table[key] : undefined;
}

const RESERVED = new Set(["and", "or", "not", "true", "false", "null", ...Object.keys(COMPARISONS)]);

class Parser {
  private index = 0;

  constructor(private readonly tokens: readonly Token[]) {}

  private peek(): Token {
    return this.tokens[this.index]!;
  }

  private advance(): Token {
    const t = this.tokens[this.index]!;
    if (t.kind !== "end") this.index++;
    return t;
  }

  private isWord(t: Token, ...words: string[]): boolean {
    return t.kind === "word" && words.includes(String(t.value).toLowerCase());
  }

  private expect(kind: Token["kind"], expected: string): Token {
    const t = this.peek();
    if (t.kind !== kind) throw filterSyntaxError(t.text, t.position, expected);
    return this.advance();
  }

  parseAll(): FilterExpr {
    const expr = this.parseOr(0);
    const t = this.peek();
    if (t.kind !== "end")
      throw filterSyntaxError(t.text, t.position, "and, or, or the end of the expression");
    return expr;
  }

  private parseOr(depth: number): FilterExpr {
    const items = [this.parseAnd(depth)];
    while (this.isWord(this.peek(), "or")) {
      this.advance();
      items.push(this.parseAnd(depth));
    }
    return items.length === 1 ? items[0]! : { kind: "or", items };
  }

  private parseAnd(depth: number): FilterExpr {
    const items = [this.parseUnary(depth)];
    while (this.isWord(this.peek(), "and")) {
      this.advance();
      items.push(this.parseUnary(depth));
    }
    return items.length === 1 ? items[0]! : { kind: "and", items };
  }

  private nested(depth: number, t: Token): number {
    if (depth + 1 > MAX_NESTING) {
      throw filterTooComplex(
        `The $filter nests deeper than ${MAX_FILTER_DEPTH} levels (at position ${t.position}).`,
        {
          max_depth: MAX_FILTER_DEPTH,
          position: t.position,
        },
      );
    }
    return depth + 1;
  }

  private parseUnary(depth: number): FilterExpr {
    const t = this.peek();
    if (this.isWord(t, "not")) {
      this.advance();
      return { kind: "not", item: this.parseUnary(this.nested(depth, t)) };
    }
    return this.parsePrimary(depth);
  }

  private parsePrimary(depth: number): FilterExpr {
    const t = this.peek();
    if (t.kind === "lparen") {
      this.advance();
      const inner = this.parseOr(this.nested(depth, t));
      this.expect("rparen", "')'");
      return inner;
    }
    if (t.kind !== "word" || RESERVED.has(String(t.value).toLowerCase())) {
      throw filterSyntaxError(t.text, t.position, "a field name, a function or '('");
    }
    const fn = named(FUNCTIONS, t.value);
    if (fn && this.tokens[this.index + 1]?.kind === "lparen") return this.parseFunction(fn);
    this.advance();
    const opToken = this.peek();
    const op = opToken.kind === "word" ? named(COMPARISONS, opToken.value) : undefined;
    if (!op) throw filterSyntaxError(opToken.text, opToken.position, "a comparison (eq, ne, gt, ge, lt, le)");
    this.advance();
    return this.condition(String(t.value), op, this.parseLiteral());
  }

  private parseFunction(op: FilterOperator): FilterExpr {
    this.advance();
    this.expect("lparen", "'('");
    const field = this.peek();
    if (field.kind !== "word" || RESERVED.has(String(field.value).toLowerCase())) {
      throw filterSyntaxError(field.text, field.position, "a field name");
    }
    this.advance();
    this.expect("comma", "','");
    const value = this.parseLiteral();
    this.expect("rparen", "')'");
    return this.condition(String(field.value), op, value);
  }

  private parseLiteral(): FilterLiteral {
    const t = this.peek();
    if (t.kind === "string" || t.kind === "number") {
      this.advance();
      return t.value;
    }
    if (this.isWord(t, "true", "false", "null")) {
      this.advance();
      const word = String(t.value).toLowerCase();
      return word === "null" ? null : word === "true";
    }
    throw filterSyntaxError(t.text, t.position, "a value ('text', a number, true, false or null)");
  }

  private condition(field: string, op: FilterOperator, value: FilterLiteral): FilterCondition {
    return { kind: "condition", field, op, value, origin: FILTER_PARAMETER };
  }
}

/** Parses a $filter expression. Throws INVALID_FILTER (with the offending token) or FILTER_TOO_COMPLEX. */
export function parseFilterExpression(text: string): FilterExpr {
  if (text.length > MAX_FILTER_LENGTH) {
    throw filterTooComplex(`The $filter is longer than ${MAX_FILTER_LENGTH} characters.`, {
      max_length: MAX_FILTER_LENGTH,
      length: text.length,
    });
  }
  return new Parser(tokenize(text)).parseAll();
}
