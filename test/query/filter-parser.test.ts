import { describe, expect, it } from "vitest";
import { ApiError } from "../../src/errors.ts";
import { parseFilterExpression } from "../../src/query/filter-parser.ts";

function failure(text: string): ApiError {
  try {
    parseFilterExpression(text);
  } catch (err) {
    if (err instanceof ApiError) return err;
    throw err;
  }
  throw new Error(`expected ${text} to fail`);
}

describe("$filter parser", () => {
  it("parses comparisons with every operator into conditions", () => {
    const ops = { eq: "eq", ne: "ne", gt: "gt", ge: "gte", lt: "lt", le: "lte", gte: "gte", lte: "lte" };
    for (const [word, op] of Object.entries(ops)) {
      expect(parseFilterExpression(`AGE ${word} 3`)).toEqual({
        kind: "condition",
        field: "AGE",
        op,
        value: 3,
        origin: "$filter",
      });
    }
  });

  it("parses the functions startwith, endwith, contains, equals", () => {
    expect(parseFilterExpression("startwith(NAME,'Ro')")).toMatchObject({
      op: "startswith",
      field: "NAME",
      value: "Ro",
    });
    expect(parseFilterExpression("startswith(NAME, 'Ro')")).toMatchObject({ op: "startswith" });
    expect(parseFilterExpression("endwith(NAME,'Srl')")).toMatchObject({ op: "endswith", value: "Srl" });
    expect(parseFilterExpression("contains(NAME,'ss')")).toMatchObject({ op: "contains", value: "ss" });
    expect(parseFilterExpression("equals(NAME,'x')")).toMatchObject({ op: "eq", value: "x" });
  });

  it("gives and precedence over or, honours parentheses and not, case-insensitively", () => {
    expect(parseFilterExpression("A eq 1 OR B eq 2 and C eq 3")).toEqual({
      kind: "or",
      items: [
        expect.objectContaining({ field: "A" }),
        {
          kind: "and",
          items: [expect.objectContaining({ field: "B" }), expect.objectContaining({ field: "C" })],
        },
      ],
    });
    expect(parseFilterExpression("(A eq 1 or B eq 2) AND NOT C eq 3")).toEqual({
      kind: "and",
      items: [
        {
          kind: "or",
          items: [expect.objectContaining({ field: "A" }), expect.objectContaining({ field: "B" })],
        },
        { kind: "not", item: expect.objectContaining({ field: "C" }) },
      ],
    });
  });

  it("reads literals: quoted strings with escaping, numbers, true, false, null", () => {
    expect(parseFilterExpression("N eq 'O''Brien'")).toMatchObject({ value: "O'Brien" });
    expect(parseFilterExpression("N eq 'a\\'b\\\\c'")).toMatchObject({ value: "a'b\\c" });
    expect(parseFilterExpression('N eq "say \\"hi\\" ""now"""')).toMatchObject({ value: 'say "hi" "now"' });
    expect(parseFilterExpression("N eq 'line\\nnext'")).toMatchObject({ value: "line\nnext" });
    expect(parseFilterExpression("N eq -12.5e1")).toMatchObject({ value: -125 });
    expect(parseFilterExpression("N eq TRUE")).toMatchObject({ value: true });
    expect(parseFilterExpression("N eq false")).toMatchObject({ value: false });
    expect(parseFilterExpression("N ne Null")).toMatchObject({ op: "ne", value: null });
    expect(parseFilterExpression("N eq 'ünï €'")).toMatchObject({ value: "ünï €" });
  });

  it("reports the offending token and its position in errors", () => {
    const e = failure("NAME eq 'x' or CODE xx 3");
    expect(e.status).toBe(400);
    expect(e.code).toBe("INVALID_FILTER");
    expect(e.details).toEqual({ token: "xx", position: 21, expected: expect.stringContaining("comparison") });
    expect(e.errors).toEqual([{ field: "$filter", message: expect.stringContaining("'xx' at position 21") }]);

    expect(failure("NAME eq 'x").details).toMatchObject({ token: "'x", position: 9 });
    expect(failure("NAME eq").details).toMatchObject({ token: "", position: 8 });
    expect(failure("NAME eq 'x' ; DROP TABLE t").details).toMatchObject({ token: ";", position: 13 });
    expect(failure("NAME eq 'x' -- comment").details).toMatchObject({ token: "-- comment", position: 13 });
    expect(failure("NAME eq 'x')").details).toMatchObject({ token: ")" });
    expect(failure("(NAME eq 'x'").details).toMatchObject({ token: "", expected: "')'" });
    expect(failure("NAME eq OTHER").details).toMatchObject({ token: "OTHER" });
    expect(failure("'x' eq NAME").details).toMatchObject({ token: "'x'" });
    expect(failure("startwith(NAME 'x')").details).toMatchObject({ token: "'x'", expected: "','" });
    expect(failure("and eq 1").details).toMatchObject({ token: "and" });
    expect(failure("").details).toMatchObject({ token: "" });
    expect(failure("N eq 1e999").code).toBe("INVALID_FILTER");
  });

  it("refuses text over 2000 characters and nesting beyond the parser's bound as FILTER_TOO_COMPLEX", () => {
    const long = `NAME eq '${"x".repeat(1995)}'`;
    expect(long.length).toBeGreaterThan(2000);
    expect(failure(long)).toMatchObject({ status: 400, code: "FILTER_TOO_COMPLEX" });
    expect(() => parseFilterExpression(`NAME eq '${"x".repeat(1980)}'`)).not.toThrow();
    const deep = `${"(".repeat(12)}A eq 1${")".repeat(12)}`;
    expect(failure(deep)).toMatchObject({ code: "FILTER_TOO_COMPLEX" });
    expect(failure(`${"not ".repeat(12)}A eq 1`)).toMatchObject({ code: "FILTER_TOO_COMPLEX" });
  });

  it("an Object.prototype name is no comparison and no function (a 400, not an operator read off the prototype)", () => {
    for (const name of ["constructor", "toString", "valueOf", "hasOwnProperty", "__proto__"]) {
      expect(failure(`NAME ${name} 'x'`), name).toMatchObject({ status: 400, code: "INVALID_FILTER" });
      const fn = failure(`${name}(NAME, 'x')`);
      expect(fn.status, name).toBe(400);
    }
  });
});
